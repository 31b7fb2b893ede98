#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/factory.h"
#include "graph/node.h"
#include "io/checksum.h"

namespace tg {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 100ull << 20;  // as the reference implementation
constexpr int kMaxDepth = 4;                   // {"name": {"shape": [..]}} is 3 deep
constexpr const char* kChecksumKey = "tapegrad.xxh64";

struct DTypeInfo {
  const char* name;
  size_t bytes;
  DType stored_as;
};

bool dtype_info(const std::string& s, DTypeInfo& out) {
  static const DTypeInfo kTypes[] = {{"F32", 4, kFloat32}, {"F64", 8, kFloat64}, {"I64", 8, kInt64},
                                     {"BOOL", 1, kBool},   {"F16", 2, kFloat32}, {"BF16", 2, kBFloat16},
                                     {"I32", 4, kInt64}};
  for (const auto& t : kTypes)
    if (s == t.name) {
      out = t;
      return true;
    }
  return false;
}

const char* st_dtype_name(DType d) {
  switch (d) {
    case DType::kFloat32: return "F32";
    case DType::kFloat64: return "F64";
    case DType::kInt64: return "I64";
    case DType::kBool: return "BOOL";
    case DType::kBFloat16: return "BF16";
  }
  return "?";
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

// Maximum nesting of the JSON text, outside strings: rejects pathological headers up front.
struct Entry {
  std::string name;
  DTypeInfo type;
  Shape shape;
  uint64_t begin, end;
};

Status bad(const std::string& source, std::string_view what) {
  return io_error("{}: not a valid safetensors file: {}", source, what);
}

}  // namespace

std::string serialize_safetensors(const StateDict& tensors_in, const Metadata& metadata) {
  // Tensors on a GPU are written from a host copy (a documented copy: saving reads them back).
  bool any_gpu = false;
  for (const auto& [name, t] : tensors_in) any_gpu = any_gpu || t.is_cuda();
  StateDict on_host;
  if (any_gpu)
    for (const auto& [name, t] : tensors_in) on_host.insert(name, t.is_cuda() ? t.to(kCPU) : t);
  const StateDict& tensors = any_gpu ? on_host : tensors_in;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TG_CHECK(name != "__metadata__", "save_safetensors", "'__metadata__' is reserved and cannot name a tensor");
    uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = st_dtype_name(t.dtype());
    entry["shape"] = shape;
    entry["data_offsets"] = nlohmann::ordered_json::array({offset, offset + bytes});
    header[name] = entry;
    offset += bytes;
  }
  // One xxHash64 per tensor over its stored bytes, under kChecksumKey, as a JSON object by name.
  nlohmann::ordered_json sums = nlohmann::ordered_json::object();
  for (const auto& [name, t] : tensors)
    sums[name] = xxh64_hex(t.raw_data(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  Metadata meta = metadata;
  meta[kChecksumKey] = sums.dump();
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::string out(8, '\0');
  uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& [name, t] : tensors)
    out.append(static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  return out;
}

namespace {

// What a header says, checked: every tensor's entry (file order), the metadata (less our
// checksums) and the checksums by name (empty when the file has none).
struct Index {
  std::vector<Entry> entries;
  Metadata metadata;
  std::map<std::string, std::string> sums;
};

// One pass over a header's JSON (a SAX reader: no document is built, so a million entries cost
// what their bytes do): each top-level entry's fields as written, in file order, checked later by
// parse_header; a name past kMaxTensorName bytes or given twice stops the pass (problem says which).
struct RawEntry {
  std::string name;
  bool is_object = false;                  // the value is an object (else it lacks every field)
  bool has_dtype = false, has_shape = false, has_offsets = false;
  bool dtype_is_string = false, shape_is_array = false, offsets_are_array = false;
  std::string dtype = {};
  std::vector<std::string> shape = {}, offsets = {};  // each element as JSON text ("3", "-1", "\"x\"")
  std::vector<uint64_t> shape_u = {}, offsets_u = {};  // the same, where non-negative integers
  std::vector<char> shape_ok = {}, offsets_ok = {};   // which elements are non-negative integers
};

struct HeaderReader : nlohmann::json_sax<json> {
  std::vector<RawEntry> entries;
  Metadata metadata;
  bool metadata_seen = false, metadata_is_object = false;
  std::string metadata_not_string;  // the first metadata key whose value is not a string
  absl::flat_hash_set<std::string> seen;
  std::string problem;

  // Where the next value goes.
  enum class Role { kTop, kEntry, kMetadata, kShape, kOffsets, kIgnored };
  std::vector<Role> stack;  // open containers
  enum class Field { kNone, kDtype, kShape, kOffsets, kOther };
  Field field = Field::kNone;
  std::string meta_key;
  bool in_metadata = false;

  RawEntry& cur() { return entries.back(); }
  Role top() const { return stack.empty() ? Role::kIgnored : stack.back(); }

  // A scalar value (JSON text for messages, and its value when a non-negative integer).
  bool scalar(const std::string& text, bool is_u64, uint64_t u, const std::string* str) {
    switch (top()) {
      case Role::kTop:
        if (in_metadata) metadata_seen = true;  // __metadata__ given a scalar: not an object
        return true;                            // an entry given a scalar: is_object stays false
      case Role::kEntry:
        if (field == Field::kDtype) {
          cur().has_dtype = true;
          cur().dtype_is_string = str != nullptr;
          if (str) cur().dtype = *str;
        } else if (field == Field::kShape) {
          cur().has_shape = true;
          cur().shape_is_array = false;
        } else if (field == Field::kOffsets) {
          cur().has_offsets = true;
          cur().offsets_are_array = false;
        }
        return true;
      case Role::kMetadata:
        if (str) metadata[meta_key] = *str;
        else if (metadata_not_string.empty()) metadata_not_string = meta_key;
        return true;
      case Role::kShape:
        cur().shape.push_back(text);
        cur().shape_u.push_back(u);
        cur().shape_ok.push_back(is_u64);
        return true;
      case Role::kOffsets:
        cur().offsets.push_back(text);
        cur().offsets_u.push_back(u);
        cur().offsets_ok.push_back(is_u64);
        return true;
      case Role::kIgnored: return true;
    }
    return true;
  }
  // A container opens: what it is for.
  bool open(bool object) {
    const Role parent = top();
    Role role = Role::kIgnored;
    if (stack.empty()) {
      role = object ? Role::kTop : Role::kIgnored;
    } else if (parent == Role::kTop) {
      if (in_metadata) {
        metadata_seen = true;
        metadata_is_object = object;
        role = object ? Role::kMetadata : Role::kIgnored;
      } else {
        cur().is_object = object;
        role = object ? Role::kEntry : Role::kIgnored;
      }
    } else if (parent == Role::kEntry) {
      if (field == Field::kDtype) {
        cur().has_dtype = true;
        cur().dtype_is_string = false;
      } else if (field == Field::kShape) {
        cur().has_shape = true;
        cur().shape_is_array = !object;
        cur().shape.clear(), cur().shape_u.clear(), cur().shape_ok.clear();
        role = object ? Role::kIgnored : Role::kShape;
      } else if (field == Field::kOffsets) {
        cur().has_offsets = true;
        cur().offsets_are_array = !object;
        cur().offsets.clear(), cur().offsets_u.clear(), cur().offsets_ok.clear();
        role = object ? Role::kIgnored : Role::kOffsets;
      }
    } else if (parent == Role::kMetadata) {
      if (metadata_not_string.empty()) metadata_not_string = meta_key;
    } else if (parent == Role::kShape || parent == Role::kOffsets) {
      scalar(object ? "{...}" : "[...]", false, 0, nullptr);  // a nested container: not a dimension
    }
    stack.push_back(role);
    return true;
  }
  bool close() {
    stack.pop_back();
    if (stack.size() == 1) in_metadata = false;
    return true;
  }

  bool key(string_t& k) override {
    if (top() == Role::kTop) {
      if (k.size() > kMaxTensorName) {
        problem = fmt::format("a tensor name of {} bytes ('{}') exceeds the limit of {} bytes", k.size(),
                              clip_for_message(k), kMaxTensorName);
        return false;
      }
      if (!seen.insert(k).second) {
        problem = fmt::format("tensor '{}' appears twice in the header", clip_for_message(k, 200));
        return false;
      }
      in_metadata = k == "__metadata__";
      if (!in_metadata) {
        entries.emplace_back();
        entries.back().name = k;
      }
    } else if (top() == Role::kEntry) {
      field = k == "dtype" ? Field::kDtype : k == "shape" ? Field::kShape : k == "data_offsets" ? Field::kOffsets : Field::kOther;
    } else if (top() == Role::kMetadata) {
      meta_key = k;
    }
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool null() override { return scalar("null", false, 0, nullptr); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false", false, 0, nullptr); }
  bool number_integer(number_integer_t v) override {
    return scalar(std::to_string(v), v >= 0, v >= 0 ? static_cast<uint64_t>(v) : 0, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) override { return scalar(std::to_string(v), true, v, nullptr); }
  bool number_float(number_float_t, const string_t& text) override { return scalar(text, false, 0, nullptr); }
  bool string(string_t& v) override {  // as JSON text only where a message may quote it
    const bool quoted = top() == Role::kShape || top() == Role::kOffsets;
    return scalar(quoted ? json(v).dump() : std::string(), false, 0, &v);
  }
  bool binary(binary_t&) override { return scalar("binary", false, 0, nullptr); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// The 8-byte length against the file's size; the header's length n.
Status check_length(uint64_t n, uint64_t file_size, const std::string& source) {
  if (file_size < 8) return bad(source, fmt::format("the file has {} bytes, fewer than the 8-byte header length", file_size));
  if (n > file_size - 8)
    return bad(source, fmt::format("header length {} exceeds the {} bytes after it (truncated file?)", n, file_size - 8));
  if (n > kMaxHeader) return bad(source, fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxHeader));
  return {};
}

Result<Index> parse_header(std::string_view text, uint64_t data_size, const std::string& source) {
  if (text.empty() || text.front() != '{') return bad(source, "the header does not start with '{'");
  if (json_depth(text, kMaxDepth) > kMaxDepth) return bad(source, "the header's JSON is nested too deeply");

  HeaderReader h;
  if (!json::sax_parse(text.begin(), text.end(), &h)) {
    if (!h.problem.empty()) return bad(source, h.problem);
    return bad(source, "the header is not valid JSON");
  }

  Index out;
  std::vector<Entry>& entries = out.entries;
  if (h.metadata_seen) {
    if (!h.metadata_is_object) return bad(source, "__metadata__ is not an object");
    if (!h.metadata_not_string.empty())
      return bad(source, fmt::format("__metadata__ value of '{}' is not a string", h.metadata_not_string));
    out.metadata = std::move(h.metadata);
  }
  entries.reserve(h.entries.size());
  for (RawEntry& r : h.entries) {
    const std::string& name = r.name;
    if (!r.is_object || !r.has_dtype || !r.has_shape || !r.has_offsets)
      return bad(source, fmt::format("entry '{}' needs dtype, shape and data_offsets", name));
    Entry e{name, {}, {}, 0, 0};
    if (!r.dtype_is_string) return bad(source, fmt::format("dtype of '{}' is not a string", name));
    if (!dtype_info(r.dtype, e.type))
      return bad(source, fmt::format("tensor '{}' has unsupported dtype {} (supported: F32 F64 F16 BF16 I64 I32 BOOL)",
                                     name, r.dtype));
    if (!r.shape_is_array || r.shape.size() > 16)
      return bad(source, fmt::format("shape of '{}' is not an array of at most 16 dimensions", name));
    uint64_t numel = 1, nonzero = 1;  // the product of the non-zero dims must fit int64 too
    for (size_t i = 0; i < r.shape.size(); ++i) {
      const uint64_t dim = r.shape_u[i];
      if (!r.shape_ok[i] || dim > (1ull << 48))
        return bad(source, fmt::format("shape of '{}' has an invalid dimension {}", name, r.shape[i]));
      if (dim != 0 && nonzero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim)
        return bad(source, fmt::format("shape of '{}' overflows", name));
      if (dim != 0) nonzero *= dim;
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    if (!r.offsets_are_array || r.offsets.size() != 2 || !r.offsets_ok[0] || !r.offsets_ok[1])
      return bad(source, fmt::format("data_offsets of '{}' must be two non-negative integers", name));
    e.begin = r.offsets_u[0];
    e.end = r.offsets_u[1];
    if (e.begin > e.end || e.end > data_size)
      return bad(source, fmt::format("tensor '{}' has offsets [{}, {}] outside the {}-byte data section", name, e.begin,
                                     e.end, data_size));
    if (numel > std::numeric_limits<uint64_t>::max() / e.type.bytes || e.end - e.begin != numel * e.type.bytes)
      return bad(source, fmt::format("tensor '{}' of dtype {} and shape {} needs {} bytes, its offsets span {}", name,
                                     e.type.name, e.shape, numel * e.type.bytes, e.end - e.begin));
    entries.push_back(std::move(e));
  }

  // The buffer must be covered exactly: sorted by offset, each tensor starts where the last ended.
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expect = 0;
  for (const Entry* e : order) {
    if (e->begin < expect) return bad(source, fmt::format("tensor '{}' overlaps the tensor before it", e->name));
    if (e->begin > expect) return bad(source, fmt::format("unused bytes (a hole) before tensor '{}'", e->name));
    expect = e->end;
  }
  if (expect != data_size)
    return bad(source, fmt::format("the data section has {} bytes but the tensors cover {}", data_size, expect));

  // Our writers' per-tensor checksums, when the file has them (a file from elsewhere has none).
  if (auto it = out.metadata.find(kChecksumKey); it != out.metadata.end()) {
    const std::string what = fmt::format("metadata '{}'", kChecksumKey);
    json j = json_depth(it->second, 2) > 1 ? json() : json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return bad(source, what + " is not a JSON object of checksums by tensor name");
    for (auto s = j.begin(); s != j.end(); ++s) {
      const bool hex = s.value().is_string() && s.value().get<std::string>().size() == 16 &&
                       s.value().get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!hex) return bad(source, fmt::format("{}: the checksum of '{}' is {}, not 16 hex digits", what, s.key(), s.value().dump()));
      if (!h.seen.count(s.key()) || s.key() == "__metadata__")
        return bad(source, fmt::format("{} names '{}', which is not a tensor of the file", what, s.key()));
      out.sums[s.key()] = s.value().get<std::string>();
    }
    for (const Entry& e : entries)
      if (!out.sums.count(e.name)) return bad(source, fmt::format("{} has no checksum for tensor '{}'", what, e.name));
    out.metadata.erase(it);
  }
  return out;
}

// A tensor's stored bytes against its checksum (when the file has them), and a bool tensor's bytes.
Status verify(const Index& index, const Entry& e, const char* src, const std::string& source) {
  if (!index.sums.empty()) {
    const std::string got = xxh64_hex(src, e.end - e.begin);
    if (got != index.sums.at(e.name))
      return io_error("{}: tensor '{}' fails its checksum (xxh64 {} recorded, {} read): the file is corrupt (a changed "
                      "byte, or a partial copy)", source, e.name, index.sums.at(e.name), got);
  }
  if (std::string_view(e.type.name) == "BOOL")
    for (uint64_t i = 0; i < e.end - e.begin; ++i)
      if (static_cast<unsigned char>(src[i]) > 1)
        return bad(source, fmt::format("bool tensor '{}' holds byte {} (expected 0 or 1)", e.name,
                                       static_cast<unsigned>(static_cast<unsigned char>(src[i]))));
  return {};
}

// Whether the stored bytes are the tensor's own (no conversion: F32, F64, BF16, I64, BOOL).
bool stored_as_is(const Entry& e) {
  const std::string_view n = e.type.name;
  return n != "F16" && n != "I32";
}

// Verified stored bytes into t (of e's shape and e.type.stored_as), converting F16 and I32.
Status decode(const Index& index, const Entry& e, const char* src, Tensor& t, const std::string& source) {
  TG_RETURN_IF_ERROR(verify(index, e, src, source));
  const int64_t count = t.numel();
  const std::string_view tn = e.type.name;
  if (tn == "F16") {
    float* dst = t.data<float>();
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = half_to_float(h);
    }
  } else if (tn == "I32") {
    int64_t* dst = t.data<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      int32_t x;
      std::memcpy(&x, src + 4 * i, 4);
      dst[i] = x;
    }
  } else if (count > 0 && static_cast<const void*>(src) != t.raw_data()) {
    std::memcpy(t.raw_data(), src, e.end - e.begin);
  }
  return {};
}

}  // namespace

Result<SafetensorsFile> parse_safetensors(std::string_view bytes, const std::string& source) {
  uint64_t n = 0;
  if (bytes.size() >= 8) std::memcpy(&n, bytes.data(), 8);
  TG_RETURN_IF_ERROR(check_length(n, bytes.size(), source));
  Result<Index> index = parse_header(bytes.substr(8, n), bytes.size() - 8 - n, source);
  if (!index.ok()) return index.status();
  SafetensorsFile out;
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : index->entries) {
    Tensor t = empty(e.shape, e.type.stored_as);
    TG_RETURN_IF_ERROR(decode(*index, e, data + e.begin, t, source));
    out.tensors.insert(e.name, t);
  }
  out.metadata = std::move(index->metadata);
  return out;
}

Status save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  std::string bytes;
  try {
    bytes = serialize_safetensors(tensors, metadata);
  } catch (const std::exception& e) {  // a reserved or non-UTF-8 name, say
    return io_error("{}: cannot write: {}", path, e.what());
  }
  return write_file_atomic(path, bytes);
}

// ---- Reading tensor by tensor ----------------------------------------------------------------

struct SafetensorsReader::Impl {
  std::string path;
  int fd = -1;
  uint64_t data_start = 0;
  Index index;
  std::vector<TensorInfo> infos;
  std::map<std::string, size_t> by_name;
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
  // `size` bytes from file offset `offset` into dst; `what` names them in messages.
  Status read_at(uint64_t offset, uint64_t size, char* dst, std::string_view what) const {
    uint64_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, dst + done, static_cast<size_t>(std::min<uint64_t>(size - done, 1ull << 30)),
                                  static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return io_error("{}: read error in {} ({})", path, what, std::strerror(errno));
      if (got == 0) return io_error("{}: the file ended inside {} (was it changed while being read?)", path, what);
      done += static_cast<uint64_t>(got);
    }
    return {};
  }
  // The stored bytes of e into dst (e.end - e.begin of them).
  Status read_bytes(const Entry& e, char* dst) const {
    return read_at(data_start + e.begin, e.end - e.begin, dst, fmt::format("tensor '{}'", e.name));
  }
  const Entry* find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &index.entries[it->second];
  }
};

Result<SafetensorsReader> SafetensorsReader::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  Result<int> fd = open_regular_file(path, O_CLOEXEC);  // a FIFO, device or folder refused, never waited on
  if (!fd.ok()) return fd.status();
  impl->fd = *fd;
  struct stat st {};
  if (::fstat(impl->fd, &st) != 0) return io_error("{}: cannot read ({})", path, std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t n = 0;
  if (size >= 8) TG_RETURN_IF_ERROR(impl->read_at(0, 8, reinterpret_cast<char*>(&n), "the header length"));
  TG_RETURN_IF_ERROR(check_length(n, size, path));
  std::string text(static_cast<size_t>(n), '\0');
  TG_RETURN_IF_ERROR(impl->read_at(8, n, text.data(), "the header"));
  Result<Index> index = parse_header(text, size - 8 - n, path);
  if (!index.ok()) return index.status();
  impl->index = std::move(*index);
  impl->data_start = 8 + n;
  for (size_t i = 0; i < impl->index.entries.size(); ++i) {
    const Entry& e = impl->index.entries[i];
    impl->infos.push_back({e.name, e.type.name, e.shape, e.type.stored_as});
    impl->by_name[e.name] = i;
  }
  SafetensorsReader r;
  r.impl_ = std::move(impl);
  return r;
}

const std::string& SafetensorsReader::path() const { return impl_->path; }
const std::vector<SafetensorsReader::TensorInfo>& SafetensorsReader::tensors() const { return impl_->infos; }
const Metadata& SafetensorsReader::metadata() const { return impl_->index.metadata; }
const SafetensorsReader::TensorInfo* SafetensorsReader::find(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->infos[it->second];
}

Result<Tensor> SafetensorsReader::read(const std::string& name) const {
  const Entry* e = impl_->find(name);
  if (!e) return io_error("{}: no tensor '{}'", impl_->path, name);
  Tensor t = empty(e->shape, e->type.stored_as);
  if (stored_as_is(*e)) {  // straight into the tensor's storage
    TG_RETURN_IF_ERROR(impl_->read_bytes(*e, static_cast<char*>(t.raw_data())));
    TG_RETURN_IF_ERROR(decode(impl_->index, *e, static_cast<const char*>(t.raw_data()), t, impl_->path));
    return t;
  }
  std::string bytes(static_cast<size_t>(e->end - e->begin), '\0');
  TG_RETURN_IF_ERROR(impl_->read_bytes(*e, bytes.data()));
  TG_RETURN_IF_ERROR(decode(impl_->index, *e, bytes.data(), t, impl_->path));
  return t;
}

Status SafetensorsReader::read_into(const std::string& name, Tensor& dst) const {
  const Entry* e = impl_->find(name);
  if (!e) return io_error("{}: no tensor '{}'", impl_->path, name);
  if (dst.shape() != e->shape)
    return io_error("{}: tensor '{}' has shape {}, the destination {}", impl_->path, name, e->shape, dst.shape());
  if (stored_as_is(*e) && dst.dtype() == e->type.stored_as) {
    TG_RETURN_IF_ERROR(impl_->read_bytes(*e, static_cast<char*>(dst.raw_data())));
    dst.impl().storage->bump_version();
    return verify(impl_->index, *e, static_cast<const char*>(dst.raw_data()), impl_->path);
  }
  Result<Tensor> t = read(name);
  if (!t.ok()) return t.status();
  NoGradGuard ng;
  dst.copy_(t->dtype() == dst.dtype() ? *t : t->to(dst.dtype()));
  return {};
}

Result<SafetensorsFile> load_safetensors(const std::string& path) {
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  if (!r.ok()) return r.status();
  SafetensorsFile out;
  for (const auto& info : r->tensors()) {
    Result<Tensor> t = r->read(info.name);
    if (!t.ok()) return t.status();
    out.tensors.insert(info.name, std::move(*t));
  }
  out.metadata = r->metadata();
  return out;
}


namespace {
const std::string* find_key(const Metadata& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}
}  // namespace

Result<std::string> metadata_string(const Metadata& m, const std::string& key, const std::string& source) {
  const std::string* v = find_key(m, key);
  if (!v) return io_error("{}: metadata '{}' is missing", source, key);
  return *v;
}

Result<int64_t> metadata_int(const Metadata& m, const std::string& key, const std::string& source, int64_t min, int64_t max) {
  const std::string* v = find_key(m, key);
  if (!v) return io_error("{}: metadata '{}' is missing", source, key);
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == v->data() + v->size() && (x < min || x > max)))
    return io_error("{}: metadata '{}' = '{}' is out of range (expected {} to {})", source, key, *v, min, max);
  if (ec != std::errc() || end != v->data() + v->size() || v->empty())
    return io_error("{}: metadata '{}' = '{}' is not a whole number", source, key, *v);
  return x;
}

Result<uint64_t> metadata_uint(const Metadata& m, const std::string& key, const std::string& source) {
  const std::string* v = find_key(m, key);
  if (!v) return io_error("{}: metadata '{}' is missing", source, key);
  uint64_t x = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec == std::errc::result_out_of_range) return io_error("{}: metadata '{}' = '{}' is out of range", source, key, *v);
  if (ec != std::errc() || end != v->data() + v->size() || v->empty())
    return io_error("{}: metadata '{}' = '{}' is not a whole non-negative number", source, key, *v);
  return x;
}

Result<double> metadata_double(const Metadata& m, const std::string& key, const std::string& source, double min, double max) {
  const std::string* v = find_key(m, key);
  if (!v) return io_error("{}: metadata '{}' is missing", source, key);
  double x = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || end != v->data() + v->size() || v->empty() || !std::isfinite(x))
    return io_error("{}: metadata '{}' = '{}' is not a finite number", source, key, *v);
  if (x < min || x > max) return io_error("{}: metadata '{}' = '{}' is out of range (expected {} to {})", source, key, *v, min, max);
  return x;
}

Status check_implied_shapes(const SafetensorsFile& f, const std::string& source,
                            const std::vector<std::pair<std::string, Shape>>& expected, std::string_view implied_by) {
  for (const auto& [name, want] : expected) {
    if (!f.tensors.contains(name)) return io_error("{}: tensor {} is missing", source, name);
    const Shape& got = f.tensors.at(name).shape();
    if (got != want) return io_error("{}: {} has shape {}, but {} say {}", source, name, got, implied_by, want);
  }
  return {};
}

Status check_layer_count(const SafetensorsFile& f, const std::string& source, const std::string& prefix, int64_t layers,
                         std::string_view label) {
  auto block = [&](int64_t i) { return f.tensors.contains(fmt::format("{}layers.{}.norm1.weight", prefix, i)); };
  if (layers < 1 || !block(layers - 1) || block(layers))
    return io_error("{}: metadata says {} {}layers, but the file's tensors do not", source, layers, label);
  return {};
}

Result<SafetensorsCheckpoint> open_safetensors_checkpoint(const std::string& dir, const std::string& stem) {
  const std::string single = dir + "/" + stem + ".safetensors", index_path = single + ".index.json";
  struct stat st {};
  if (::stat(single.c_str(), &st) == 0) {
    Result<SafetensorsReader> r = SafetensorsReader::open(single);
    if (!r.ok()) return r.status();
    return SafetensorsCheckpoint{single, {std::move(*r)}};
  }
  if (::stat(index_path.c_str(), &st) != 0) {
    const std::string bin = dir + "/pytorch_model.bin";
    return io_error("{}: no such file, nor {}.safetensors.index.json{}", single, stem,
                    ::stat(bin.c_str(), &st) == 0 ? " (pytorch_model.bin is a pickle, which is not read: convert it to "
                                                   "safetensors)" : " (expected a Hugging Face checkpoint folder)");
  }
  Result<std::string> text = read_file(index_path);
  if (!text.ok()) return text.status();
  if (json_depth(*text, 8) > 8) return io_error("{}: the JSON is nested too deeply for a checkpoint index", index_path);
  const json index = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object()) return io_error("{}: not a JSON object", index_path);
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object() || wm->empty())
    return io_error("{}: no \"weight_map\" object of tensor names and shard files", index_path);
  std::map<std::string, std::string> shard_of;  // tensor -> shard
  std::map<std::string, size_t> shards;         // shard -> position in files
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      return io_error("{}: weight_map['{}'] is not a file name", index_path, clip_for_message(it.key()));
    const std::string f = it.value().get<std::string>();
    const bool plain = !f.empty() && f != "." && f != ".." && f.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
    if (!plain)
      return io_error("{}: weight_map['{}'] = '{}' (expected a plain file name inside {})", index_path,
                      clip_for_message(it.key()), clip_for_message(f), dir);
    shard_of[it.key()] = f;
    shards.emplace(f, 0);
  }
  constexpr size_t kMaxShards = 100000;
  if (shards.size() > kMaxShards) return io_error("{}: names {} shards (at most {})", index_path, shards.size(), kMaxShards);
  SafetensorsCheckpoint ck{index_path, {}};
  for (auto& [f, pos] : shards) {
    pos = ck.files.size();
    Result<SafetensorsReader> r = SafetensorsReader::open(dir + "/" + f);
    if (!r.ok()) return r.status();
    for (const auto& t : r->tensors()) {
      auto it = shard_of.find(t.name);
      if (it == shard_of.end())
        return io_error("{}: holds tensor '{}', which {} does not list", r->path(), clip_for_message(t.name), index_path);
      if (it->second != f)
        return io_error("{}: holds tensor '{}', which {} places in {}", r->path(), clip_for_message(t.name), index_path,
                        clip_for_message(it->second));
    }
    ck.files.push_back(std::move(*r));
  }
  for (const auto& [name, f] : shard_of)
    if (!ck.files[shards[f]].find(name))
      return io_error("{}: lists tensor '{}' in {}, which does not hold it", index_path, clip_for_message(name), f);
  return ck;
}


}  // namespace tg
