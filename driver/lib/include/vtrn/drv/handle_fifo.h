// A FIFO of handle-ordered entries in one vector, for DmaEngine's per-queue
// `pending` and `done`: entries join at the back and leave mostly from the
// front (a head index moves), rarely from the middle (a raw chain's
// non-final descriptors, a try_take of a later handle). std::deque did the
// same with a heap block per few entries, allocated at the back and freed
// at the front again: a 64 B benchmark moves millions of handles a second
// through here, so that churn (and the cold block each new entry landed in)
// was a visible part of vtrnd's CPU per descriptor. Here the storage is
// reused: the taken prefix is dropped in one move once it is the larger
// part of the vector (amortized O(1) per entry), and emptied storage keeps
// its capacity.
//
// Iterators are plain pointers (contiguous, so std::lower_bound works on
// them); any insert, erase or pop may invalidate them, as for a vector.
#pragma once

#include <stddef.h>

#include <vector>

namespace drv {

template <typename T>
class HandleFifo {
 public:
  using iterator = T*;
  using const_iterator = const T*;

  [[nodiscard]] bool empty() const { return head_ == v_.size(); }
  [[nodiscard]] size_t size() const { return v_.size() - head_; }
  T* begin() { return v_.data() + head_; }
  T* end() { return v_.data() + v_.size(); }
  const T* begin() const { return v_.data() + head_; }
  const T* end() const { return v_.data() + v_.size(); }
  T& front() { return v_[head_]; }
  T& back() { return v_.back(); }

  void push_back(const T& x) { v_.push_back(x); }
  void pop_front() { drop_front(1); }
  void clear() {
    v_.clear();
    head_ = 0;
  }
  // Inserts x before pos; returns where it went.
  T* insert(T* pos, const T& x) {
    const size_t i = size_t(pos - v_.data());
    v_.insert(v_.begin() + ptrdiff_t(i), x);
    return v_.data() + i;
  }
  // Erases *pos; returns the entry that followed it.
  T* erase(T* pos) { return erase(pos, pos + 1); }
  // Erases [first, last); returns the entry that followed.
  T* erase(T* first, T* last) {
    if (first == begin()) {
      drop_front(size_t(last - first));
      return begin();
    }
    const size_t i = size_t(first - v_.data());
    v_.erase(v_.begin() + ptrdiff_t(i), v_.begin() + ptrdiff_t(last - v_.data()));
    return v_.data() + i;
  }

 private:
  // Below this many taken entries the prefix is never moved.
  static constexpr size_t kCompactMin = 1024;

  void drop_front(size_t n) {
    head_ += n;
    if (head_ == v_.size()) {
      clear();
    } else if (head_ >= kCompactMin && head_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), v_.begin() + ptrdiff_t(head_));
      head_ = 0;
    }
  }

  std::vector<T> v_;
  size_t head_ = 0;
};

}  // namespace drv
