// SmallVector<T, N>: a vector whose first N elements live inside the object, so that the few
// feeds of a training step (`{{x, xs}, {y, ys}}`) and the few values of its results are built,
// returned and destroyed without touching the heap. Past N it moves to the heap as std::vector
// does. Only what the session's types need: no insert in the middle, no erase.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace trainhooks {

template <typename T, size_t N>
class SmallVector {
 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVector() noexcept {}  // user-provided: `const Feeds feeds;` is valid
  SmallVector(std::initializer_list<T> items) { append(items.begin(), items.end()); }
  SmallVector(const std::vector<T>& items) { append(items.begin(), items.end()); }  // NOLINT
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(std::move(other)); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(std::move(other));
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> items) {
    clear();
    append(items.begin(), items.end());
    return *this;
  }
  // The usual case, an empty vector with its inline storage, is two compares at the call site.
  ~SmallVector() {
    if (size_ != 0 || on_heap()) destroy_all();
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& front() const noexcept { return data_[0]; }
  const T& back() const noexcept { return data_[size_ - 1]; }
  operator std::span<const T>() const noexcept { return {data_, size_}; }  // NOLINT

  void reserve(size_t n) {
    if (n > capacity_) grow_to(n);
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      // The argument may be an element of this vector: construct it before moving the others.
      T item(std::forward<Args>(args)...);
      grow_to(capacity_ * 2);
      return *::new (static_cast<void*>(data_ + size_++)) T(std::move(item));
    }
    return *::new (static_cast<void*>(data_ + size_++)) T(std::forward<Args>(args)...);
  }
  void push_back(const T& item) { emplace_back(item); }
  void push_back(T&& item) { emplace_back(std::move(item)); }
  void pop_back() noexcept { std::destroy_at(data_ + --size_); }
  template <typename It>
  void append(It first, It last) {
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>) {
      reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    }
    for (; first != last; ++first) emplace_back(*first);
  }
  // Destroys the elements; the capacity (inline or on the heap) is kept for reuse.
  void clear() noexcept {
    std::destroy(data_, data_ + size_);
    size_ = 0;
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(inline_)); }
  bool on_heap() const noexcept { return capacity_ > N; }

  void grow_to(size_t n) {
    n = std::max(n, N * 2);
    T* heap = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    std::uninitialized_move(data_, data_ + size_, heap);
    std::destroy(data_, data_ + size_);
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = heap;
    capacity_ = n;
  }
  [[gnu::noinline]] void destroy_all() noexcept {
    std::destroy(data_, data_ + size_);
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
  }
  void release() noexcept {
    clear();
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = inline_data();
    capacity_ = N;
  }
  void take(SmallVector&& other) noexcept {
    if (other.on_heap()) {
      data_ = std::exchange(other.data_, other.inline_data());
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, N);
      return;
    }
    std::uninitialized_move(other.data_, other.data_ + other.size_, data_);
    size_ = other.size_;
    other.clear();
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = inline_data();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace trainhooks
