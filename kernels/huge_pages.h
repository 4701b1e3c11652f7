// Transparent huge pages for large host arrays: those read a few bytes at a
// time at random (a replay buffer's per-slot arrays, its sum tree), where
// with 4 KiB pages every access is a TLB miss as well as a cache miss, and
// large outputs, which then take 512 times fewer page faults.
#pragma once

#include <cstddef>
#include <vector>

namespace obsaug {

// madvise(MADV_HUGEPAGE) on the whole 2 MiB pages inside [memory, memory +
// bytes), before their first touch. A hint: where transparent huge pages are
// off or unsupported, nothing changes.
void advise_huge_pages(void* memory, size_t bytes);

// Makes *v `n` copies of `value` in fresh memory advised for huge pages
// before it is first written.
template <class T>
void assign_on_huge_pages(std::vector<T>* v, size_t n, const T& value) {
  std::vector<T>().swap(*v);
  v->reserve(n);
  advise_huge_pages(v->data(), n * sizeof(T));
  v->assign(n, value);
}

}  // namespace obsaug
