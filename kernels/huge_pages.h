// Host memory for large arrays. Transparent huge pages for those read a few
// bytes at a time at random (a replay buffer's per-slot arrays, its sum
// tree), where with 4 KiB pages every access is a TLB miss as well as a cache
// miss, and for large outputs, which then take 512 times fewer page faults;
// and the machine's memory, against which a buffer or pool too large for it
// is refused by name before it is allocated.
#pragma once

#include <cstddef>
#include <vector>

namespace obsaug {

// madvise(MADV_HUGEPAGE) on the whole 2 MiB pages inside [memory, memory +
// bytes), before their first touch. A hint: where transparent huge pages are
// off or unsupported, nothing changes.
void advise_huge_pages(void* memory, size_t bytes);

// This machine's physical memory in bytes; 0 when the system does not say.
size_t physical_memory_bytes();

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
