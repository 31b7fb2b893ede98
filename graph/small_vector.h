#pragma once
// SmallVector<T, N>: a std::vector-like container that keeps up to N elements inline (no heap
// allocation) and then moves to the heap with geometric growth. It replaces absl::InlinedVector
// in public headers so that users of tapegrad need not see Abseil. Iterators are plain T*.
//
// Insertions in the middle append and then rotate into place: simple, and correct when the value
// inserted aliases an element of the vector. When growing, new elements are always constructed in
// the new buffer before the old ones move, for the same reason (v.push_back(v[0])).
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace tg {

namespace sv_detail {
template <class It, class Tag>
concept IterOf = requires { typename std::iterator_traits<It>::iterator_category; } &&
                 std::is_convertible_v<typename std::iterator_traits<It>::iterator_category, Tag>;
}  // namespace sv_detail

template <class T, size_t N>
class SmallVector {
  static_assert(N > 0, "SmallVector needs at least one inline element");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() noexcept {}
  // The others delegate to the default constructor: once it has run, the destructor cleans up
  // if the body throws.
  explicit SmallVector(size_type n) : SmallVector() { resize(n); }
  SmallVector(size_type n, const T& v) : SmallVector() { assign(n, v); }
  template <class It>
    requires sv_detail::IterOf<It, std::input_iterator_tag>
  SmallVector(It first, It last) : SmallVector() {
    assign(first, last);
  }
  SmallVector(std::initializer_list<T> il) : SmallVector() { assign(il.begin(), il.end()); }
  SmallVector(const SmallVector& o) : SmallVector() { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : SmallVector() {
    take(o);
  }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      if (o.is_inline()) {
        clear();  // keep our buffer: it holds at least N
        take(o);
      } else {
        release();
        meta_ = 0;
        take(o);
      }
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  // Size and storage.
  size_type size() const noexcept { return meta_ >> 1; }
  bool empty() const noexcept { return size() == 0; }
  size_type capacity() const noexcept { return is_inline() ? N : heap_.cap; }
  static constexpr size_type max_size() noexcept { return ~size_type{0} / 2 / sizeof(T); }
  static constexpr size_type inline_capacity() noexcept { return N; }
  T* data() noexcept { return is_inline() ? inline_data() : heap_.ptr; }
  const T* data() const noexcept { return is_inline() ? inline_data() : heap_.ptr; }

  // Element access.
  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& at(size_type i) {
    if (i >= size()) throw std::out_of_range("SmallVector::at: index out of range");
    return data()[i];
  }
  const T& at(size_type i) const { return const_cast<SmallVector*>(this)->at(i); }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size() - 1]; }
  const T& back() const noexcept { return data()[size() - 1]; }

  // Iterators.
  iterator begin() noexcept { return data(); }
  const_iterator begin() const noexcept { return data(); }
  const_iterator cbegin() const noexcept { return data(); }
  iterator end() noexcept { return data() + size(); }
  const_iterator end() const noexcept { return data() + size(); }
  const_iterator cend() const noexcept { return data() + size(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator crbegin() const noexcept { return const_reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crend() const noexcept { return const_reverse_iterator(begin()); }

  // Appending and removing at the end.
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size() == capacity()) {
      grow_append(1, [&](T* p) { ::new (static_cast<void*>(p)) T(std::forward<Args>(args)...); });
    } else {
      ::new (static_cast<void*>(data() + size())) T(std::forward<Args>(args)...);
      set_size(size() + 1);
    }
    return back();
  }
  void pop_back() noexcept {
    set_size(size() - 1);
    std::destroy_at(data() + size());
  }

  // Inserting anywhere: each returns an iterator to the first inserted element (or to pos).
  iterator insert(const_iterator pos, const T& v) { return emplace(pos, v); }
  iterator insert(const_iterator pos, T&& v) { return emplace(pos, std::move(v)); }
  template <class... Args>
  iterator emplace(const_iterator pos, Args&&... args) {
    size_type i = index(pos);
    emplace_back(std::forward<Args>(args)...);
    rotate(data() + i, data() + size() - 1, data() + size());
    return data() + i;
  }
  iterator insert(const_iterator pos, size_type n, const T& v) {
    size_type i = index(pos), old = size();
    append_n(n, v);
    rotate(data() + i, data() + old, data() + size());
    return data() + i;
  }
  template <class It>
    requires sv_detail::IterOf<It, std::input_iterator_tag>
  iterator insert(const_iterator pos, It first, It last) {
    size_type i = index(pos), old = size();
    if constexpr (sv_detail::IterOf<It, std::forward_iterator_tag>) {
      size_type n = static_cast<size_type>(std::distance(first, last));
      if (n > capacity() - size()) {
        grow_append(n, [&](T* p) { std::uninitialized_copy(first, last, p); });
      } else {
        std::uninitialized_copy(first, last, data() + size());
        set_size(size() + n);
      }
    } else {
      for (; first != last; ++first) emplace_back(*first);
    }
    rotate(data() + i, data() + old, data() + size());
    return data() + i;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) {
    return insert(pos, il.begin(), il.end());
  }

  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* f = data() + index(first);
    T* l = data() + index(last);
    if (f != l) {
      T* new_end = f;
      for (T* from = l; from != end(); ++from) *new_end++ = std::move(*from);
      std::destroy(new_end, end());
      set_size(size() - (static_cast<size_type>(l - f)));
    }
    return f;
  }

  // Whole-vector changes.
  void clear() noexcept {
    std::destroy(begin(), end());
    set_size(0);
  }
  void resize(size_type n) {
    if (n <= size()) {
      std::destroy(data() + n, end());
    } else {
      if (n > capacity()) reallocate(grown_capacity(n));  // geometric, as for repeated +1 resizes
      std::uninitialized_value_construct(end(), data() + n);
    }
    set_size(n);
  }
  void resize(size_type n, const T& v) {
    if (n <= size()) {
      std::destroy(data() + n, end());
      set_size(n);
    } else {
      append_n(n - size(), v);
    }
  }
  void reserve(size_type n) {
    if (n > capacity()) reallocate(n);
  }
  void shrink_to_fit() {
    if (is_inline() || size() == capacity()) return;
    if (size() > N) {
      reallocate(size());
      return;
    }
    T* heap = heap_.ptr;
    size_type n = size(), cap = heap_.cap;
    relocate(heap, n, inline_data());  // overwrites heap_
    deallocate(heap, cap);
    meta_ = n << 1;
  }

  void assign(size_type n, const T& v) {
    if (n > capacity()) {
      replace_storage(n, n, [&](T* p) { std::uninitialized_fill_n(p, n, v); });
    } else if (n <= size()) {
      for (size_type i = 0; i < n; ++i) data()[i] = v;
      std::destroy(data() + n, end());
      set_size(n);
    } else {
      for (T& x : *this) x = v;
      std::uninitialized_fill_n(end(), n - size(), v);
      set_size(n);
    }
  }
  template <class It>
    requires sv_detail::IterOf<It, std::input_iterator_tag>
  void assign(It first, It last) {
    if constexpr (sv_detail::IterOf<It, std::forward_iterator_tag>) {
      size_type n = static_cast<size_type>(std::distance(first, last));
      if (n > capacity()) {
        replace_storage(n, n, [&](T* p) { std::uninitialized_copy(first, last, p); });
      } else if (n <= size()) {
        T* new_end = data();
        for (; first != last; ++first) *new_end++ = *first;
        std::destroy(new_end, end());
        set_size(n);
      } else {
        It mid = std::next(first, static_cast<difference_type>(size()));
        T* out = data();
        for (It in = first; in != mid; ++in) *out++ = *in;
        std::uninitialized_copy(mid, last, end());
        set_size(n);
      }
    } else {
      clear();
      for (; first != last; ++first) emplace_back(*first);
    }
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  void swap(SmallVector& o) noexcept(std::is_nothrow_move_constructible_v<T> &&
                                     std::is_nothrow_swappable_v<T>) {
    if (this == &o) return;
    if (!is_inline() && !o.is_inline()) {
      std::swap(heap_, o.heap_);
      std::swap(meta_, o.meta_);
    } else if (!is_inline() || !o.is_inline()) {
      SmallVector& heap = is_inline() ? o : *this;
      SmallVector& in = is_inline() ? *this : o;
      Heap saved = heap.heap_;
      size_type n = heap.size();
      heap.meta_ = 0;
      relocate_noexcept(in.data(), in.size(), heap.inline_data());  // overwrites heap.heap_
      heap.set_size(in.size());
      in.meta_ = 0;
      in.set_heap(saved.ptr, saved.cap);
      in.set_size(n);
    } else {
      SmallVector& big = size() >= o.size() ? *this : o;
      SmallVector& small = size() >= o.size() ? o : *this;
      for (size_type i = 0; i < small.size(); ++i) swap_one(small.data()[i], big.data()[i]);
      size_type extra = big.size() - small.size();
      relocate_noexcept(big.data() + small.size(), extra, small.data() + small.size());
      small.set_size(small.size() + extra);
      big.set_size(big.size() - (extra));
    }
  }
  friend void swap(SmallVector& a, SmallVector& b) noexcept(noexcept(a.swap(b))) { a.swap(b); }

  // Hidden friends, so derived classes (Shape) compare without extra declarations.
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    if (a.size() != b.size()) return false;
    for (size_type i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }
  friend bool operator!=(const SmallVector& a, const SmallVector& b) { return !(a == b); }
  friend bool operator<(const SmallVector& a, const SmallVector& b) {
    size_type n = a.size() < b.size() ? a.size() : b.size();
    for (size_type i = 0; i < n; ++i) {
      if (a[i] < b[i]) return true;
      if (b[i] < a[i]) return false;
    }
    return a.size() < b.size();
  }
  friend bool operator>(const SmallVector& a, const SmallVector& b) { return b < a; }
  friend bool operator<=(const SmallVector& a, const SmallVector& b) { return !(b < a); }
  friend bool operator>=(const SmallVector& a, const SmallVector& b) { return !(a < b); }

 private:
  static constexpr bool kTrivial = std::is_trivially_copyable_v<T>;

  // <algorithm> would add a quarter second to every user's compile; these are all we need of it.
  static void swap_one(T& a, T& b) {
    using std::swap;
    swap(a, b);
  }
  static void reverse(T* first, T* last) {
    while (first < last) swap_one(*first++, *--last);
  }
  // Makes [middle, last) come first, as std::rotate.
  static void rotate(T* first, T* middle, T* last) {
    reverse(first, middle);
    reverse(middle, last);
    reverse(first, last);
  }

  T* inline_data() noexcept { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const noexcept { return reinterpret_cast<const T*>(inline_); }
  bool is_inline() const noexcept { return (meta_ & 1) == 0; }
  void set_size(size_type n) noexcept { meta_ = (n << 1) | (meta_ & 1); }
  // Points at a heap buffer; the inline elements (if any) must have been moved out first.
  void set_heap(T* p, size_type cap) noexcept {
    heap_.ptr = p;
    heap_.cap = cap;
    meta_ |= 1;
  }
  size_type index(const_iterator p) const noexcept { return static_cast<size_type>(p - data()); }

  static T* allocate(size_type n) { return std::allocator<T>().allocate(n); }
  static void deallocate(T* p, size_type n) noexcept { std::allocator<T>().deallocate(p, n); }

  // Moves n live elements from src to uninitialized dst (copies when T's move may throw and T can
  // be copied, so a throw leaves src intact), then destroys them in src.
  static void relocate(T* src, size_type n, T* dst) {
    if constexpr (kTrivial) {
      if (n) std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(T));
    } else {
      if constexpr (std::is_nothrow_move_constructible_v<T> || !std::is_copy_constructible_v<T>) {
        std::uninitialized_move(src, src + n, dst);
      } else {
        std::uninitialized_copy(src, src + n, dst);
      }
      std::destroy(src, src + n);
    }
  }
  // For moves between inline buffers, where there is no copy fallback.
  static void relocate_noexcept(T* src, size_type n, T* dst) {
    if constexpr (kTrivial) {
      if (n) std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(T));
    } else {
      std::uninitialized_move(src, src + n, dst);
      std::destroy(src, src + n);
    }
  }

  // Takes o's elements; *this must be empty (its buffer, inline or heap, is kept if o is inline).
  void take(SmallVector& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (o.is_inline()) {
      relocate_noexcept(o.data(), o.size(), data());
      set_size(o.size());
      o.meta_ = 0;
    } else {
      if (!is_inline()) deallocate(heap_.ptr, heap_.cap);
      set_heap(o.heap_.ptr, o.heap_.cap);
      meta_ = o.meta_;
      o.meta_ = 0;
    }
  }

  // Destroys the elements and frees the heap buffer; leaves the members dangling.
  void release() noexcept {
    std::destroy(begin(), end());
    if (!is_inline()) deallocate(heap_.ptr, heap_.cap);
  }

  void reallocate(size_type cap) {
    T* buf = allocate(cap);
    try {
      relocate(data(), size(), buf);
    } catch (...) {
      deallocate(buf, cap);
      throw;
    }
    if (!is_inline()) deallocate(heap_.ptr, heap_.cap);
    set_heap(buf, cap);
  }

  size_type grown_capacity(size_type min_cap) const {
    if (min_cap > max_size()) throw std::length_error("SmallVector: too many elements");
    size_type twice = capacity() <= max_size() / 2 ? 2 * capacity() : max_size();
    return twice > min_cap ? twice : min_cap;
  }

  // Moves to a larger buffer with n more elements at the end. `construct` builds exactly those n
  // (cleaning up after itself if it throws) in the new buffer while the old elements are still in
  // place, so its arguments may refer to them.
  template <class F>
  void grow_append(size_type n, F&& construct) {
    size_type cap = grown_capacity(size() + n);
    T* buf = allocate(cap);
    try {
      construct(buf + size());
    } catch (...) {
      deallocate(buf, cap);
      throw;
    }
    try {
      relocate(data(), size(), buf);
    } catch (...) {
      std::destroy(buf + size(), buf + size() + n);
      deallocate(buf, cap);
      throw;
    }
    if (!is_inline()) deallocate(heap_.ptr, heap_.cap);
    set_heap(buf, cap);
    set_size(size() + n);
  }

  // Replaces all elements by n new ones that `construct` builds in a new buffer of cap >= n.
  template <class F>
  void replace_storage(size_type cap, size_type n, F&& construct) {
    T* buf = allocate(cap);
    try {
      construct(buf);
    } catch (...) {
      deallocate(buf, cap);
      throw;
    }
    release();
    meta_ = 0;
    set_heap(buf, cap);
    set_size(n);
  }

  void append_n(size_type n, const T& v) {
    if (n > capacity() - size()) {
      grow_append(n, [&](T* p) { std::uninitialized_fill_n(p, n, v); });
    } else {
      std::uninitialized_fill_n(end(), n, v);
      set_size(size() + n);
    }
  }

  // As absl::InlinedVector: the size and a heap flag in one word, then either the inline elements
  // or the heap buffer (SmallVector<int64_t, 6>, a Shape, is 56 bytes).
  struct Heap {
    T* ptr;
    size_type cap;
  };
  size_type meta_ = 0;  // size << 1 | 1 when the elements are on the heap
  union {
    alignas(T) unsigned char inline_[N * sizeof(T)];
    Heap heap_;
  };
};

}  // namespace tg
