#include "kernels/huge_pages.h"

#include <unistd.h>

#include <cstdint>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace obsaug {

void advise_huge_pages(void* memory, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // madvise wants page-aligned bounds; only whole 2 MiB extents can be huge.
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(memory) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(memory) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)memory;
  (void)bytes;
#endif
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

}  // namespace obsaug
