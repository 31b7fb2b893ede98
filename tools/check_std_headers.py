#!/usr/bin/env python3
"""Every file includes, itself or through tapegrad's own headers, the standard header of each std
name it uses (a third-party header does not count).

Standard libraries pull headers into each other by chance, and each release pulls in fewer: g++ 13
dropped <cstdint> from <string>, so a file that used uint32_t after including only <string>
compiled with g++ 12 and failed on Ubuntu 24.04. No compiler flag catches this (libc++'s
_LIBCPP_REMOVE_TRANSITIVE_INCLUDES still brings <cstdint> with <string>), so this reads the code:
for every .cc/.h/.cu/.cuh file it finds the std names used outside comments and string literals,
and the standard headers reachable through its own #include lines and those of tapegrad's headers
it includes (recursively), and says which header each unmet name needs. A std name missing from
the table below fails the check too, so the table grows with the code.

  tools/check_std_headers.py [FILE...]   (default: every tracked source file)
"""
import os
import re
import subprocess
import sys

# name -> the standard headers any of which declares it. Where the standard itself makes one
# header include another (<iostream> -> <istream>/<ostream>/<ios>), that is in IMPLIES below.
_TABLE = """
algorithm: min max clamp sort stable_sort find find_if fill fill_n copy copy_n count count_if
  all_of any_of none_of max_element min_element lower_bound upper_bound binary_search reverse
  unique partial_sort nth_element rotate shuffle search mismatch adjacent_find transform
  equal remove remove_if replace ranges::any_of ranges::all_of ranges::sort ranges::find
  minmax_element set_difference generate
numeric: iota accumulate partial_sum inner_product gcd lcm reduce
utility: move forward pair make_pair swap exchange declval as_const index_sequence index_sequence_for
  make_index_sequence in_place integer_sequence
tuple: tuple make_tuple tie get tuple_size tuple_element tuple_element_t apply forward_as_tuple
memory: shared_ptr unique_ptr make_shared make_unique weak_ptr allocate_shared static_pointer_cast
  const_pointer_cast dynamic_pointer_cast enable_shared_from_this allocator uninitialized_copy
  uninitialized_fill_n uninitialized_move uninitialized_value_construct destroy destroy_at
  align addressof construct_at default_delete
string: string u32string u16string wstring to_string stoi stol stoll stoul stoull stod stof
  getline char_traits string::npos basic_string
string_view: string_view u32string_view basic_string_view string_view::npos
vector: vector
array: array
map: map multimap
set: set multiset
unordered_map: unordered_map unordered_multimap
unordered_set: unordered_set
deque: deque
list: list
queue: queue priority_queue
optional: optional nullopt nullopt_t make_optional
variant: variant visit holds_alternative get_if monostate
functional: function greater less equal_to plus hash reference_wrapper ref cref invoke
  not_equal_to multiplies
span: span dynamic_extent
initializer_list: initializer_list
limits: numeric_limits
type_traits: is_same_v is_same is_convertible_v is_arithmetic_v is_unsigned_v is_signed_v
  is_trivially_copyable_v is_nothrow_swappable_v is_nothrow_move_assignable_v
  is_nothrow_move_constructible_v is_copy_constructible_v is_floating_point_v is_integral_v
  is_pointer_v is_enum_v is_void_v remove_pointer_t remove_cv_t remove_reference_t
  remove_cvref_t decay_t enable_if_t conditional_t underlying_type_t make_unsigned_t
  integral_constant true_type false_type is_base_of_v invoke_result_t
  is_default_constructible_v is_trivially_destructible_v is_constant_evaluated is_class_v
  is_reference_v is_const_v is_empty_v is_standard_layout_v is_trivial_v
concepts: same_as integral floating_point convertible_to invocable
bit: bit_cast rotl rotr endian endian::native endian::little endian::big countl_zero countr_zero
  popcount bit_width has_single_bit bit_ceil bit_floor
charconv: from_chars to_chars chars_format from_chars_result to_chars_result
system_error: error_code errc errc::result_out_of_range errc::invalid_argument system_error
  generic_category system_category error_condition
stdexcept: runtime_error invalid_argument out_of_range length_error logic_error overflow_error
  range_error domain_error runtime_error::runtime_error
exception: exception exception_ptr current_exception rethrow_exception terminate make_exception_ptr
  uncaught_exceptions
new: align_val_t launder bad_alloc nothrow hardware_destructive_interference_size
cstddef: size_t ptrdiff_t nullptr_t max_align_t byte offsetof
cstdint: int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uintptr_t intptr_t
  uintmax_t intmax_t
cstdio: printf fprintf snprintf sscanf fscanf puts fputs fputc fflush fopen fclose fread fwrite
  freopen rename perror FILE fseek ftell fgets getc putchar vsnprintf stderr stdout
  tmpfile fileno setvbuf
cstdlib: getenv free malloc aligned_alloc strtod strtof strtol strtoll strtoul strtoull atoi atol
  atoll abort exit atexit system abs:cstdlib realloc calloc qsort quick_exit _Exit
cstring: memcpy memset memcmp memmove strlen strcmp strncmp strncpy strerror strchr strstr
  strrchr strcpy memchr
cmath: sqrt exp log log1p log2 log10 pow fabs abs floor ceil round lround llround trunc isfinite
  isnan isinf nan cos sin tan tanh atan2 atan erf erfc fmod fmax fmin expm1 hypot signbit cbrt
  copysign nextafter ldexp frexp acos asin cosh sinh nearbyint
cctype: isspace isalnum isalpha isdigit ispunct isupper islower tolower toupper isxdigit isprint
  iscntrl isgraph
csignal: raise signal sig_atomic_t
ctime: time_t time localtime gmtime strftime localtime_r gmtime_r
chrono: chrono::steady_clock chrono::system_clock chrono::high_resolution_clock chrono::duration
  chrono::milliseconds chrono::microseconds chrono::nanoseconds chrono::seconds chrono::minutes
  chrono::hours chrono::duration_cast chrono::time_point
ratio: milli micro nano ratio
thread: thread this_thread::sleep_for this_thread::yield this_thread::get_id
  thread::hardware_concurrency jthread
mutex: mutex lock_guard unique_lock scoped_lock call_once once_flag recursive_mutex defer_lock try_to_lock adopt_lock
shared_mutex: shared_mutex shared_lock
condition_variable: condition_variable condition_variable_any
atomic: atomic memory_order memory_order_relaxed memory_order_acquire memory_order_release
  memory_order_acq_rel memory_order_seq_cst atomic_thread_fence atomic_flag
future: future promise async packaged_task
random: mt19937 mt19937_64 uniform_int_distribution uniform_real_distribution
  normal_distribution random_device discrete_distribution bernoulli_distribution
regex: regex regex_replace regex_search regex_match smatch cmatch regex_error sregex_iterator
iterator: istreambuf_iterator istream_iterator ostream_iterator back_inserter inserter
  distance next prev advance reverse_iterator iterator_traits input_iterator_tag
  forward_iterator_tag random_access_iterator_tag bidirectional_iterator_tag output_iterator_tag
  begin end size data empty cbegin cend rbegin rend ssize make_move_iterator
ios: ios::binary ios::trunc ios::out ios::in ios::end ios::beg ios::cur ios::app ios::ate
  ios_base hex dec fixed scientific boolalpha streamsize streamoff
istream: istream ws
ostream: ostream endl flush ends
iostream: cin cout cerr clog
fstream: ofstream ifstream fstream filebuf
sstream: istringstream ostringstream stringstream
streambuf: streambuf
iosfwd: iosfwd
iomanip: setw setfill put_time setprecision
filesystem: filesystem
numbers: numbers::pi numbers::e numbers::sqrt2 numbers::ln2 numbers::inv_sqrtpi
  numbers::sqrt3 numbers::log2e numbers::inv_pi
compare: strong_ordering weak_ordering partial_ordering three_way_comparable
source_location: source_location
typeinfo: type_info bad_cast
typeindex: type_index
any: any any_cast
execution: execution
"""

# Names declared by several headers, each of which counts (cppreference lists them per name).
_ALSO = {
    "move": {"algorithm"}, "swap": {"algorithm", "string_view", "string", "vector", "array", "map",
                                   "set", "unordered_map", "unordered_set", "memory", "optional",
                                   "variant", "tuple", "functional", "deque", "list"},
    "get": {"variant", "array", "utility", "tuple"},
    "begin": {"array", "deque", "list", "map", "regex", "set", "span", "string", "string_view",
              "unordered_map", "unordered_set", "vector"},
    "hash": {"string", "string_view", "memory", "optional", "variant", "thread", "system_error",
             "typeindex", "vector", "bitset", "coroutine"},
    "size_t": {"cstdio", "cstdlib", "cstring", "ctime", "cwchar", "cuchar"},
    "nullptr_t": set(), "abs": {"cstdlib"}, "remove": {"cstdio"}, "getline": {"istream"},
    "error_code": {"filesystem"},  # its functions take one; filesystem_error derives from system_error
    "errc": {"charconv"}, "errc::result_out_of_range": {"charconv"}, "errc::invalid_argument": {"charconv"},
    "milli": {"chrono"}, "micro": {"chrono"}, "nano": {"chrono"},
    "exception": {"stdexcept", "new", "typeinfo"},
    "erase_if": {"vector", "string", "map", "set", "unordered_map", "unordered_set", "deque", "list"},
    "pair": {"map", "unordered_map"},  # their value_type; both are declared to include <compare> only, but need pair
    "uintmax_t": {"cinttypes"}, "FILE": {"cwchar"},
    "ostream": {"iostream", "iosfwd"}, "istream": {"iostream", "fstream", "sstream"},
}
for _n in ("end", "size", "data", "empty", "cbegin", "cend", "rbegin", "rend", "ssize"):
    _ALSO[_n] = _ALSO["begin"]

# Headers the standard says include others ([iostream.syn], [string.syn] ...).
IMPLIES = {
    "iostream": {"ios", "streambuf", "istream", "ostream", "iosfwd"},
    "istream": {"ios", "iosfwd"}, "ostream": {"ios", "iosfwd"},
    "fstream": {"istream", "ostream", "ios", "iosfwd"}, "sstream": {"istream", "ostream", "ios", "iosfwd"},
    "ios": {"iosfwd"},
    "string": {"compare", "initializer_list"}, "string_view": {"compare"},
    "vector": {"compare", "initializer_list"}, "array": {"compare", "initializer_list"},
    "map": {"compare", "initializer_list"}, "set": {"compare", "initializer_list"},
    "unordered_map": {"compare", "initializer_list"}, "unordered_set": {"compare", "initializer_list"},
    "deque": {"compare", "initializer_list"}, "list": {"compare", "initializer_list"},
    "queue": {"compare", "initializer_list"}, "utility": {"compare", "initializer_list"},
    "algorithm": {"initializer_list"}, "random": {"initializer_list"}, "regex": {"compare", "initializer_list"},
    "chrono": {"compare"}, "system_error": {"compare"}, "optional": {"compare"},
    "variant": {"compare"}, "tuple": {"compare"}, "memory": {"compare"}, "thread": {"compare"},
    "filesystem": {"compare"}, "typeindex": {"compare"}, "coroutine": {"compare"},
    "bitset": {"string", "iosfwd"}, "cinttypes": {"cstdint"}, "stdexcept": {"exception"},
}

def _parse_table():
    headers = {}
    current = None
    for line in _TABLE.strip().splitlines():
        if not line.startswith(" ") and ":" in line:
            current, line = line.split(":", 1)
        for name in line.split():
            if ":" in name and not "::" in name:  # "name:header": listed under another header too
                name, other = name.split(":")
                headers.setdefault(name, set()).add(other)
            headers.setdefault(name, set()).add(current)
    for name, extra in _ALSO.items():
        headers.setdefault(name, set()).update(extra)
    return headers

HEADERS = _parse_table()
# Names used without std:: that still need a standard header.
UNQUALIFIED = ["size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
               "uint16_t", "uint32_t", "uint64_t", "uintptr_t", "intptr_t"]

_comment_or_string = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"([^(\s]*)\((?:.|\n)*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.S)
_include = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
_std_name = re.compile(r'\bstd::((?:[a-z_][a-z_0-9]*::)*[A-Za-z_][A-Za-z_0-9]*)')
_unqualified = re.compile(r'(?<![\w:.>])(' + "|".join(UNQUALIFIED) + r')\b')


def strip(text):
    return _comment_or_string.sub(lambda m: '""' if m.group(0).startswith(('"', 'R"')) else " ", text)


class Checker:
    def __init__(self, root):
        self.root = root
        self.cache = {}  # own file -> set of standard headers reachable

    def own(self, name, includer):
        for base in (os.path.dirname(includer), self.root):
            p = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(p) and p.startswith(self.root + os.sep):
                return p
        return None

    def reachable(self, path, seen=None):
        """The standard headers `path` includes, itself or through tapegrad's own headers."""
        if path in self.cache:
            return self.cache[path]
        seen = seen if seen is not None else set()
        if path in seen:
            return set()
        seen.add(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        out = set()
        for kind, name in _include.findall(text):
            if kind == "<" and name.startswith("tapegrad/"):  # how users include ours
                p = self.own(name[len("tapegrad/"):], self.root + os.sep)
                if p:
                    out |= self.reachable(p, seen)
            elif kind == "<":
                if "/" not in name and "." not in name:  # <vector>, not <fmt/core.h> or <stdio.h>
                    out.add(name)
            else:
                p = self.own(name, path)
                if p:
                    out |= self.reachable(p, seen)
        closed = set(out)
        todo = list(out)
        while todo:
            for h in IMPLIES.get(todo.pop(), ()):
                if h not in closed:
                    closed.add(h)
                    todo.append(h)
        self.cache[path] = closed
        return closed

    def check(self, path):
        """Returns the lines to print for `path` (empty when it is fine)."""
        with open(path, encoding="utf-8", errors="replace") as f:
            code = strip(f.read())
        # A .inc file is part of the file that includes it: check it there.
        for kind, name in _include.findall(code):
            if kind == '"' and name.endswith(".inc"):
                p = self.own(name, path)
                if p:
                    with open(p, encoding="utf-8", errors="replace") as f:
                        code += strip(f.read())
        have = self.reachable(path)
        problems = {}
        unknown = set()
        for name in set(_std_name.findall(code)) | set(_unqualified.findall(code)):
            if name.startswith("filesystem::"):
                name = "filesystem"
            # std::string::npos, std::chrono::steady_clock::now: a member of a known name
            parts = name.split("::")
            want = next((HEADERS[p] for p in ("::".join(parts[:k]) for k in range(len(parts), 0, -1))
                         if p in HEADERS), None)
            if want is None:
                unknown.add(name)
                continue
            if not want & have:
                problems.setdefault(" or ".join(f"<{h}>" for h in sorted(want)), set()).add(name)
        rel = os.path.relpath(path, self.root)
        lines = [f"{rel}: uses {', '.join(sorted(names))} without {hdr}" for hdr, names in sorted(problems.items())]
        lines += [f"{rel}: std::{n} is not in tools/check_std_headers.py's table: add it with its header"
                  for n in sorted(unknown)]
        return lines


def main(argv):
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if len(argv) > 1:
        files = [os.path.realpath(a) for a in argv[1:]]
    else:
        listed = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h", "*.cu", "*.cuh"],
                                check=True, capture_output=True, text=True).stdout.split()
        files = [os.path.join(root, f) for f in listed]
    checker = Checker(root)
    bad = [line for f in files for line in checker.check(f)]
    for line in bad:
        print(line)
    if bad:
        print(f"check_std_headers: {len(bad)} problem(s) in {len({b.split(':')[0] for b in bad})} file(s); "
              "each file must include the standard header of every std name it uses")
        return 1
    print(f"check_std_headers: {len(files)} files include the standard header of every std name they use")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
