// CPU backend of the fused pipeline, for every pipeline without a barrier
// (random_conv and color_jitter's contrast go to augment_cpu_frames.cpp).
//
// Work unit: one channel plane (or the three of a frame when an op mixes
// channels). The geometric part of the pipeline is separable, so for each
// sample the row and column maps of every stage are traced once, op by op
// over a whole axis (trace_axis_all), and the column maps compressed into
// runs (a contiguous copy, a mirrored copy, or one pixel repeated); each row
// is gathered with a few vector moves (from the transposed plane after an
// odd number of quarter turns), writing zero padding itself when no value op
// comes before it. The value ops then run over whole planes in pipeline
// order, one plane after another so that each stays in the L1 cache: an
// overlay is a contiguous blend, cutouts (and zero padding after a value op)
// fill row spans. Only grayscale and color_jitter wait for the three planes
// of a frame (color_jitter by rows, kernels/frame_rows_cpu.h, shared with the
// per-frame path). All arithmetic comes from kernels/pipeline.h and
// kernels/frame_eval.h.
#include "kernels/augment_cpu.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu_clones.h"
#include "kernels/frame_eval.h"
#include "kernels/frame_rows_cpu.h"
#include "kernels/plane_copy.h"
#include "kernels/streaming_stores.h"

namespace obsaug {

namespace {

// Op k's step over every coordinate of the traces. `op.kind` is replaced by
// the constant kKind, so trace_step's switch folds away and the loop, over
// arrays, vectorizes.
template <OpKind kKind>
OBSAUG_CLONES void trace_op(OpDesc op, const OpDraw& d, int k, int a, int32_t n,
                            int32_t* __restrict source, int32_t* __restrict zero_op,
                            int32_t* __restrict at) {
  op.kind = kKind;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t z = zero_op[i];
    const int32_t c = source[i];
    bool zeroed = false;
    const int32_t next = trace_step(op, d, a, c, &zeroed);
    at[i] = z >= 0 ? 0 : c;
    source[i] = z >= 0 ? c : next;
    zero_op[i] = z < 0 && zeroed ? k : z;
  }
}

using TraceOp = void (*)(OpDesc, const OpDraw&, int, int, int32_t, int32_t*, int32_t*, int32_t*);

TraceOp trace_op_of(OpKind kind) {
  static constexpr TraceOp kByKind[] = {
      trace_op<OpKind::kShift>,   trace_op<OpKind::kCrop>,    trace_op<OpKind::kOverlay>,
      trace_op<OpKind::kFlip>,    trace_op<OpKind::kRotate>,  trace_op<OpKind::kTranslate>,
      trace_op<OpKind::kOverlay>, trace_op<OpKind::kOverlay>, trace_op<OpKind::kOverlay>,
      trace_op<OpKind::kOverlay>};  // value ops (cutout ... random_conv) keep coordinates
  static_assert(static_cast<int>(OpKind::kRandomConv) == 9,
                "one entry per OpKind, kRandomConv being the last");
  return kByKind[static_cast<int>(kind)];
}

}  // namespace

// Op by op over all coordinates: the axis a live coordinate lies on is the
// same for all of them at every stage, so each op's step runs n times in a row.
void trace_axis_all(const PipelineDesc& p, const OpDraw* draws, int axis, int32_t n,
                    AxisTraces* t) {
  t->source.resize(n);
  t->zero_op.assign(n, -1);
  for (int32_t i = 0; i < n; ++i) t->source[i] = i;
  t->swapped_ops = 0;
  int a = axis;
  for (int k = p.n_ops - 1; k >= 0; --k) {
    const OpDesc& op = p.ops[k];
    const OpDraw& d = draws[k];
    t->at_op[k].resize(n);
    if (a != axis) t->swapped_ops = static_cast<uint8_t>(t->swapped_ops | 1u << k);
    trace_op_of(op.kind)(op, d, k, a, n, t->source.data(), t->zero_op.data(), t->at_op[k].data());
    a = axis_before(op, d, a);
  }
  t->source_swapped = a != axis;
}

void trace_axis_all(const PipelineDesc& p, const OpDraw* draws, int axis, int32_t n,
                    AxisTrace* traces) {
  AxisTraces t;
  trace_axis_all(p, draws, axis, n, &t);
  for (int32_t i = 0; i < n; ++i) {
    AxisTrace& out = traces[i];
    const int32_t z = t.zero_op[i];
    out.source = t.source[i];
    out.zero_op = static_cast<int16_t>(z);
    // ops below the blanking one are never reached: no bit, at_op 0
    const uint32_t reached = z < 0 ? 0xFFu : ~((1u << z) - 1u);
    out.swapped = static_cast<uint8_t>(t.swapped_ops & reached);
    out.source_swapped = z < 0 ? t.source_swapped : ((t.swapped_ops >> z) & 1u) != 0;
    for (int k = 0; k < p.n_ops; ++k) out.at_op[k] = t.at_op[k][i];
  }
}

namespace {

// dst[dst_x + i] = src[src_x + i * step], i < len: step +1 copies, 0 repeats
// one pixel, -1 copies mirrored (a flip).
struct Run {
  int32_t dst_x;
  int32_t len;
  int32_t src_x;
  int32_t step;
  bool copy() const { return step == 1; }
};

void runs_of(const std::vector<int32_t>& coords, std::vector<Run>* runs) {
  runs->clear();
  const int32_t n = static_cast<int32_t>(coords.size());
  int32_t x = 0;
  while (x < n) {
    Run run{x, 1, coords[x], 1};
    if (x + 1 < n) {
      const int32_t delta = coords[x + 1] - coords[x];
      if (delta == 0 || delta == -1) run.step = delta;
    }
    while (x + run.len < n && coords[x + run.len] == run.src_x + run.step * run.len) ++run.len;
    if (run.len == 1) run.step = 0;  // the same thing; keeps [repeat][copy][repeat] simple
    runs->push_back(run);
    x += run.len;
  }
}

// OBSAUG_CPU_LOOPS as the library found it when it loaded, copied (a later
// setenv changes nothing) into trivially destructible storage (ops may run
// while the process exits).
// Before its initialiser has run it reads as zeros: a known setting.
struct LoopsSetting {
  bool unknown = false;
  CpuLoops cap = CpuLoops::kAvx512;  // the widest set the setting allows
  char text[64] = {};                // unknown: the value, cut to 63 bytes
};

const LoopsSetting kLoopsSetting = [] {
  LoopsSetting setting;
  const char* value = std::getenv("OBSAUG_CPU_LOOPS");
  if (value == nullptr || value[0] == '\0') return setting;
  for (const CpuLoops loops : {CpuLoops::kBaseline, CpuLoops::kAvx2, CpuLoops::kAvx512}) {
    if (std::strcmp(value, cpu_loops_name(loops)) == 0) {
      setting.cap = loops;
      return setting;
    }
  }
  setting.unknown = true;
  std::strncpy(setting.text, value, sizeof(setting.text) - 1);
  return setting;
}();

// The loops that run (cpu_loops() in the header); an unknown setting runs no
// CPU op (cpu_loops_setting_problem), so what it leaves here does not matter.
const CpuLoops kLoops = std::min(widest_cpu_loops(), kLoopsSetting.cap);
const bool kHasAvx2 = kLoops >= CpuLoops::kAvx2;

// The common column shape [repeat][copy or mirrored copy][repeat] (any chain
// of shifts, crops, flips and translates), as plain values so the row loop keeps them in registers.
struct SimpleColumns {
  int32_t left_len = 0, left_src = 0;
  int32_t mid_dst = 0, mid_len = 0, mid_src = 0;
  bool mid_mirrored = false;  // the middle reads src[mid_src - i] (a flip)
  int32_t right_dst = 0, right_len = 0, right_src = 0;
};

// How to gather one row's columns: generic runs, or the simple shape.
struct ColumnPlan {
  std::vector<Run> runs;
  bool simple = false;
  SimpleColumns shape;

  // Recomputes the plan for `coords` (column -> source column), reusing storage.
  void assign(const std::vector<int32_t>& coords) {
    runs_of(coords, &runs);
    shape = SimpleColumns();
    simple = false;
    size_t i = 0;
    if (i < runs.size() && runs[i].step == 0) {
      shape.left_len = runs[i].len;
      shape.left_src = runs[i].src_x;
      ++i;
    }
    if (i >= runs.size() || runs[i].step == 0) return;
    shape.mid_mirrored = runs[i].step < 0;
    shape.mid_dst = runs[i].dst_x;
    shape.mid_len = runs[i].len;
    shape.mid_src = runs[i].src_x;
    ++i;
    if (i < runs.size() && runs[i].step == 0) {
      shape.right_dst = runs[i].dst_x;
      shape.right_len = runs[i].len;
      shape.right_src = runs[i].src_x;
      ++i;
    }
    simple = i == runs.size();
  }
};

constexpr int64_t kFillBytes = 32;

// Writes kFillBytes of `value` at dst (one vector store).
template <typename T>
inline void fill_block(T* dst, T value) {
  T block[kFillBytes / sizeof(T)];
  for (auto& v : block) v = value;
  __builtin_memcpy(dst, block, kFillBytes);
}

// The edge fills of the simple shape can be single 32-byte stores anchored at
// the row's ends (written before the middle copy, which then overwrites what
// they spill) when neither store reaches the other edge's pixels.
template <typename T>
inline bool fills_as_blocks(const SimpleColumns& c, int32_t width) {
  const int64_t size = sizeof(T);
  const int64_t row_bytes = width * size;
  return row_bytes >= kFillBytes && c.left_len * size <= kFillBytes &&
         c.right_len * size <= kFillBytes &&
         (c.right_len == 0 || c.right_dst * size >= kFillBytes) &&
         (c.left_len == 0 || row_bytes - kFillBytes >= c.left_len * size);
}

// Eight bytes of `value` repeated.
template <typename T>
uint64_t fill_pattern(T value) {
  T block[8 / sizeof(T)];
  for (auto& v : block) v = value;
  uint64_t word;
  __builtin_memcpy(&word, block, 8);
  return word;
}

// Sets the n bytes at dst to `pattern` (fill_pattern of one value, n a
// multiple of its size) with stores only, the last one overlapping: edge
// fills and cutout rows are a few bytes, where a loop or memset call costs
// more than the pixels, and a read-modify-write of a word would wait for the
// row's own stores (the gather's) to reach the cache.
inline void fill_bytes(unsigned char* dst, int64_t n, uint64_t pattern) {
  if (n >= 16) {
    const uint64_t block[2] = {pattern, pattern};
    int64_t i = 0;
    for (; i + 16 < n; i += 16) __builtin_memcpy(dst + i, block, 16);
    __builtin_memcpy(dst + n - 16, block, 16);
  } else if (n >= 8) {
    __builtin_memcpy(dst, &pattern, 8);
    __builtin_memcpy(dst + n - 8, &pattern, 8);
  } else if (n >= 4) {
    const uint32_t word = static_cast<uint32_t>(pattern);
    __builtin_memcpy(dst, &word, 4);
    __builtin_memcpy(dst + n - 4, &word, 4);
  } else if (n >= 2) {
    const uint16_t half = static_cast<uint16_t>(pattern);
    __builtin_memcpy(dst, &half, 2);
    __builtin_memcpy(dst + n - 2, &half, 2);
  } else if (n == 1) {
    *dst = static_cast<unsigned char>(pattern);
  }
}

// Sets row[0, len) (at_end: row[n - len, n)) of a row of n elements to `value`.
template <typename T>
inline void fill_edge(T* row, int32_t n, int32_t len, T value, bool at_end) {
  fill_bytes(reinterpret_cast<unsigned char*>(at_end ? row + n - len : row),
             static_cast<int64_t>(len) * sizeof(T), fill_pattern(value));
}

// dst[i] = src[-i] for i < n (a mirrored copy): `lanes(i)` mirrors kLanes
// elements at dst + i, the last call ending at n and overlapping the one
// before; rows under kLanes go one element at a time.
template <int32_t kLanes, typename T, typename Lanes>
inline void mirror_by(T* __restrict dst, const T* __restrict src, int32_t n, Lanes lanes) {
  if (n < kLanes) {
    for (int32_t i = 0; i < n; ++i) dst[i] = src[-i];
    return;
  }
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) lanes(i);
  if (i < n) lanes(n - kLanes);
}

inline void mirror_elems(uint8_t* __restrict dst, const uint8_t* __restrict src, int32_t n) {
  mirror_by<16>(dst, src, n, [&](int32_t i) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src - i - 15));
    v = _mm_shuffle_epi32(v, 0x1B);                                // dwords reversed
    v = _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, 0xB1), 0xB1);   // words within dwords
    v = _mm_or_si128(_mm_srli_epi16(v, 8), _mm_slli_epi16(v, 8));  // bytes within words
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), v);
  });
}
inline void mirror_elems(float* __restrict dst, const float* __restrict src, int32_t n) {
  mirror_by<4>(dst, src, n, [&](int32_t i) {
    const __m128 v = _mm_loadu_ps(src - i - 3);
    _mm_storeu_ps(dst + i, _mm_shuffle_ps(v, v, 0x1B));
  });
}

// cells[x * h + y] = plane[y * w + x]: an h x w plane transposed into w x h,
// in 16 x 16 (uint8) or 4 x 4 (float) blocks of SSE2 unpacks. The last block
// of a row or column of blocks is moved back to end at the border, so it
// overlaps its neighbour (which only writes the same cells twice); planes
// narrower than a block go one pixel at a time.
template <typename T>
bool transpose_small(const T* __restrict plane, int32_t h, int32_t w, int32_t block,
                     T* __restrict cells) {
  if (h >= block && w >= block) return false;
  for (int32_t y = 0; y < h; ++y) {
    for (int32_t x = 0; x < w; ++x)
      cells[static_cast<int64_t>(x) * h + y] = plane[static_cast<int64_t>(y) * w + x];
  }
  return true;
}

// unpack_lo / unpack_hi(a, b, bits): the interleaving steps of the 16 x 16
// byte transpose, for one block per 128-bit lane: __m128i (SSE2) and
// __m256i (AVX2, two blocks side by side); P is the intrinsics' prefix.
#define OBSAUG_UNPACKS(ATTR, V, P)                  \
  ATTR inline V unpack_lo(V a, V b, int bits) {     \
    return bits == 8    ? P##_unpacklo_epi8(a, b)   \
           : bits == 16 ? P##_unpacklo_epi16(a, b)  \
           : bits == 32 ? P##_unpacklo_epi32(a, b)  \
                        : P##_unpacklo_epi64(a, b); \
  }                                                 \
  ATTR inline V unpack_hi(V a, V b, int bits) {     \
    return bits == 8    ? P##_unpackhi_epi8(a, b)   \
           : bits == 16 ? P##_unpackhi_epi16(a, b)  \
           : bits == 32 ? P##_unpackhi_epi32(a, b)  \
                        : P##_unpackhi_epi64(a, b); \
  }
// GCC compiles the __m256i instances of the templates below inlined into
// an AVX2 function (flatten); clang checks each instance's vector ABI on its
// own and refuses them, so its builds (the fuzzing one) keep the SSE2 path.
#if defined(__clang__)
#define OBSAUG_AVX2_TRANSPOSE 0
#else
#define OBSAUG_AVX2_TRANSPOSE 1
#endif
OBSAUG_UNPACKS(, __m128i, _mm)
#if OBSAUG_AVX2_TRANSPOSE
OBSAUG_UNPACKS(__attribute__((target("avx2"))), __m256i, _mm256)
#endif
#undef OBSAUG_UNPACKS

// a[r], row r of a 16 x 16 byte block (in each 128-bit lane), becomes a[c],
// its column c. Written once for both vector widths: the AVX2 caller is
// `flatten`, so that the unpacks inline into it with its target.
#pragma GCC diagnostic push
// The __m256i instance exists only inlined into AVX2 code; GCC warns that
// its out-of-line ABI would differ without AVX.
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename V>
inline void transpose_16x16(V* a) {
  V b[16];
  // Bytes of row pairs, then words of 4 rows, dwords of 8, qwords of 16.
  for (int i = 0; i < 8; ++i) {
    b[2 * i] = unpack_lo(a[2 * i], a[2 * i + 1], 8);      // columns 0..7
    b[2 * i + 1] = unpack_hi(a[2 * i], a[2 * i + 1], 8);  // columns 8..15
  }
  for (int i = 0; i < 4; ++i) {       // rows 4i..4i+3
    for (int h8 = 0; h8 < 2; ++h8) {  // columns 8 h8 ..
      a[4 * i + 2 * h8] = unpack_lo(b[4 * i + h8], b[4 * i + 2 + h8], 16);
      a[4 * i + 2 * h8 + 1] = unpack_hi(b[4 * i + h8], b[4 * i + 2 + h8], 16);
    }
  }
  // a[4 i + q]: rows 4i..4i+3 of columns 4q..4q+3, as dwords.
  for (int i = 0; i < 2; ++i) {  // rows 8i..8i+7
    for (int q = 0; q < 4; ++q) {
      b[8 * i + 2 * q] = unpack_lo(a[8 * i + q], a[8 * i + 4 + q], 32);
      b[8 * i + 2 * q + 1] = unpack_hi(a[8 * i + q], a[8 * i + 4 + q], 32);
    }
  }
  // b[8 i + 2 q + m]: rows 8i..8i+7 of columns 4q+2m, 4q+2m+1, as qwords.
  for (int j = 0; j < 8; ++j) {
    a[2 * j] = unpack_lo(b[j], b[8 + j], 64);
    a[2 * j + 1] = unpack_hi(b[j], b[8 + j], 64);
  }
}
#pragma GCC diagnostic pop

// Row r of the blocks at p (one 16-byte row per 128-bit lane), and the
// columns c of the transposed blocks stored at cells (the second lane's
// block 16 columns on, i.e. 16 rows of `cells` further).
inline __m128i load_block_row(const uint8_t* p, __m128i*) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void store_block_column(uint8_t* cells, int32_t, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(cells), v);
}
#if OBSAUG_AVX2_TRANSPOSE
__attribute__((target("avx2"))) inline __m256i load_block_row(const uint8_t* p, __m256i*) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
__attribute__((target("avx2"))) inline void store_block_column(uint8_t* cells, int32_t h,
                                                               __m256i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(cells), _mm256_castsi256_si128(v));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(cells + 16 * static_cast<int64_t>(h)),
                   _mm256_extracti128_si256(v, 1));
}
#endif

// The uint8 transpose by blocks of 16 rows x sizeof(V) columns (one or two
// 16 x 16 blocks); the last block of a row or column of blocks moves back
// to end at the border.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // as for transpose_16x16
template <typename V>
inline void transpose_blocks(const uint8_t* __restrict plane, int32_t h, int32_t w,
                             uint8_t* __restrict cells) {
  constexpr int32_t kCols = static_cast<int32_t>(sizeof(V));
  for (int32_t by = 0; by < h; by += 16) {
    const int32_t y0 = std::min(by, h - 16);
    for (int32_t bx = 0; bx < w; bx += kCols) {
      const int32_t x0 = std::min(bx, w - kCols);
      V a[16];
      for (int r = 0; r < 16; ++r)
        a[r] = load_block_row(plane + static_cast<int64_t>(y0 + r) * w + x0, a);
      transpose_16x16(a);
      for (int c = 0; c < 16; ++c)
        store_block_column(cells + static_cast<int64_t>(x0 + c) * h + y0, h, a[c]);
    }
  }
}
#pragma GCC diagnostic pop

#if OBSAUG_AVX2_TRANSPOSE
__attribute__((target("avx2"), flatten)) void transpose_bytes_avx2(const uint8_t* __restrict plane,
                                                                   int32_t h, int32_t w,
                                                                   uint8_t* __restrict cells) {
  transpose_blocks<__m256i>(plane, h, w, cells);
}
#endif

void transpose_plane(const uint8_t* __restrict plane, int32_t h, int32_t w,
                     uint8_t* __restrict cells) {
  if (transpose_small(plane, h, w, 16, cells)) return;
#if OBSAUG_AVX2_TRANSPOSE
  if (kHasAvx2 && w >= 32) {
    transpose_bytes_avx2(plane, h, w, cells);
    return;
  }
#endif
  transpose_blocks<__m128i>(plane, h, w, cells);
}

void transpose_plane(const float* __restrict plane, int32_t h, int32_t w, float* __restrict cells) {
  if (transpose_small(plane, h, w, 4, cells)) return;
  for (int32_t by = 0; by < h; by += 4) {
    const int32_t y0 = std::min(by, h - 4);
    for (int32_t bx = 0; bx < w; bx += 4) {
      const int32_t x0 = std::min(bx, w - 4);
      __m128 r[4];
      for (int i = 0; i < 4; ++i)
        r[i] = _mm_loadu_ps(plane + static_cast<int64_t>(y0 + i) * w + x0);
      _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
      for (int i = 0; i < 4; ++i)
        _mm_storeu_ps(cells + static_cast<int64_t>(x0 + i) * h + y0, r[i]);
    }
  }
}

template <typename T>
inline void gather_runs(const T* __restrict src, const std::vector<Run>& runs, T* __restrict dst) {
  for (const Run& run : runs) {
    T* d = dst + run.dst_x;
    const T* s = src + run.src_x;
    if (run.step == 1) {
      copy_bytes(reinterpret_cast<unsigned char*>(d), reinterpret_cast<const unsigned char*>(s),
                 static_cast<int64_t>(sizeof(T)) * run.len);
    } else if (run.step == 0) {
      const T value = *s;
      for (int32_t i = 0; i < run.len; ++i) d[i] = value;
    } else {
      mirror_elems(d, s, run.len);
    }
  }
}

// A plane whose rows are a clamped vertical translation of the input with the
// same row stride: output rows [first, end) read input rows y + dy, rows above
// read row `top`, rows below read row `bottom`. The translated rows are then
// one contiguous block of the flat plane (offset dy * width + dx), moved with
// one block copy; only their edge pixels need fixing afterwards.
struct RowTranslation {
  bool valid = false;
  int32_t first = 0, end = 0, dy = 0, top = 0, bottom = 0;
};

RowTranslation find_translation(const std::vector<int32_t>& row_source, int32_t in_h) {
  RowTranslation t;
  const int32_t h = static_cast<int32_t>(row_source.size());
  if (h != in_h || h == 0) return t;
  int32_t first = 0;
  while (first + 1 < h && row_source[first + 1] == row_source[first]) ++first;
  if (first + 1 < h && row_source[first + 1] != row_source[first] + 1) return t;
  if (first == h - 1) first = 0;  // every row reads the same row: translate from row 0
  t.first = first;
  t.dy = row_source[first] - first;
  t.end = first + 1;
  while (t.end < h && row_source[t.end] == t.end + t.dy) ++t.end;
  t.top = row_source[0];
  t.bottom = row_source[h - 1];
  for (int32_t y = 0; y < h; ++y) {
    if (y >= t.first && y < t.end) continue;
    if (row_source[y] != (y < t.first ? t.top : t.bottom)) return t;
  }
  // Rows outside the block must not read rows the block rewrites (in place).
  const auto inside = [&](int32_t r) { return r >= t.first && r < t.end; };
  if ((t.first > 0 && inside(t.top)) || (t.end < h && inside(t.bottom))) return t;
  t.valid = true;
  return t;
}

// Bytes that the next units will read, prefetched a few cache lines per row
// while this plane's rows are gathered: the next input plane, and this
// plane's share of the next sample's distractor image. The hardware
// prefetchers stop at 4 KiB pages, so without this the first rows of every
// plane wait for memory; spread over the rows, rather than issued at once,
// the prefetches do not stall the gather (BENCHMARKS.md, "Read-ahead"). The
// generic row loop uses it too (float32 crop 76 + flip, B = 256: 8.75-12.14
// ms without, 7.68-9.68 ms with); the translation path does not.
// The lines go to the second-level cache (prefetcht1), not the first: a plane
// ahead is about 150 lines, and filling L1 with them measured 1.2-1.5x slower
// (BENCHMARKS.md, "Read-ahead into L2").
class ReadAhead {
 public:
  enum Stream { kInput, kPool, kStreams };

  // The streams are spread over `rows` calls of row(), which prefetches on
  // every kEvery-th call the share of kEvery rows (fewer loop set-ups).
  explicit ReadAhead(int32_t rows) : calls_(std::max((rows + kEvery - 1) / kEvery, 1)) {}

  void set(Stream s, const void* begin, int64_t bytes) {
    if (begin == nullptr || bytes <= 0) return;
    const uintptr_t at = reinterpret_cast<uintptr_t>(begin);
    at_[s] = at & ~(kLine - 1);
    end_[s] = at + static_cast<uintptr_t>(bytes);
    const int64_t lines = static_cast<int64_t>((end_[s] - at_[s] + kLine - 1) / kLine);
    share_[s] = static_cast<uintptr_t>((lines + calls_ - 1) / calls_) * kLine;
  }

  // Called once per row gathered.
  __attribute__((always_inline)) void row() {
    if (--countdown_ > 0) return;
    countdown_ = kEvery;
    advance(kInput);
    advance(kPool);
  }

 private:
  // asm volatile: GCC deletes a loop whose body is only __builtin_prefetch
  static void prefetch_line(uintptr_t at) {
    asm volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(at)));
  }

  __attribute__((always_inline)) void advance(Stream s) {
    uintptr_t at = at_[s];
    const uintptr_t end = std::min(end_[s], at + share_[s]);
    for (; at < end; at += kLine) prefetch_line(at);
    at_[s] = at;
  }

  static constexpr int32_t kEvery = 4;
  static constexpr uintptr_t kLine = 64;
  int32_t calls_;
  int32_t countdown_ = 1;              // row() calls until the next prefetches
  uintptr_t at_[kStreams] = {0, 0};    // the next line to prefetch
  uintptr_t end_[kStreams] = {0, 0};   // one past the stream's last byte
  uintptr_t share_[kStreams] = {0, 0};  // bytes of lines per kEvery rows
};

template <typename T>
inline void gather_simple(const T* __restrict src, const SimpleColumns& c, T* __restrict dst) {
  const T left = src[c.left_src];
  const T right = src[c.right_src];
  for (int32_t x = 0; x < c.left_len; ++x) dst[x] = left;
  for (int32_t x = 0; x < c.right_len; ++x) dst[c.right_dst + x] = right;
  copy_bytes(reinterpret_cast<unsigned char*>(dst + c.mid_dst),
             reinterpret_cast<const unsigned char*>(src + c.mid_src),
             static_cast<int64_t>(sizeof(T)) * c.mid_len);
}

// The translation path (see RowTranslation); `in` may equal `values`. No read-ahead:
// its one memmove streams the plane, and a plane prefetched at once made float32 shift
// slower (10.2-10.7 -> 12.0-13.8 ms at B = 256).
// `scratch` holds two rows and `edges` 2 * height values.
template <typename T>
OBSAUG_CLONES void translate_plane(const T* in, int32_t height, int32_t width,
                                   const SimpleColumns& columns, const RowTranslation& t, T* values,
                                   T* scratch, T* edges) {
  const SimpleColumns c = columns;
  T* top_row = scratch;
  T* bottom_row = scratch + width;
  if (t.first > 0)
    std::memcpy(top_row, in + static_cast<int64_t>(t.top) * width, sizeof(T) * width);
  if (t.end < height)
    std::memcpy(bottom_row, in + static_cast<int64_t>(t.bottom) * width, sizeof(T) * width);
  // Edge values of the translated rows; saved first when in place, because
  // the memmove overwrites them.
  const bool in_place = in == values;
  const T* edge_source = in;
  if (in_place) {
    for (int32_t y = t.first; y < t.end; ++y) {
      const T* src = in + static_cast<int64_t>(y + t.dy) * width;
      edges[2 * y] = src[c.left_src];
      edges[2 * y + 1] = src[c.right_src];
    }
  }
  if (t.end > t.first && c.mid_len > 0) {
    const int64_t begin = static_cast<int64_t>(t.first) * width + c.mid_dst;
    const int64_t count = static_cast<int64_t>(t.end - t.first - 1) * width + c.mid_len;
    T* dst = values + begin;
    const T* src = in + static_cast<int64_t>(t.first + t.dy) * width + c.mid_src;
    if (in_place) {  // overlapping: memmove (no slow distance measured there)
      std::memmove(dst, src, sizeof(T) * count);
    } else {
      copy_plane_bytes(dst, src, sizeof(T) * count);
    }
  }
  if (c.left_len > 0) {
    for (int32_t y = t.first; y < t.end; ++y) {
      const T value = in_place ? edges[2 * y]
                               : edge_source[static_cast<int64_t>(y + t.dy) * width + c.left_src];
      fill_edge(values + static_cast<int64_t>(y) * width, width, c.left_len, value, false);
    }
  }
  if (c.right_len > 0) {
    // The right fill always ends the row in the simple shape.
    for (int32_t y = t.first; y < t.end; ++y) {
      const T value = in_place ? edges[2 * y + 1]
                               : edge_source[static_cast<int64_t>(y + t.dy) * width + c.right_src];
      fill_edge(values + static_cast<int64_t>(y) * width, width, c.right_len, value, true);
    }
  }
  for (int32_t y = 0; y < t.first; ++y)
    gather_simple(top_row, c, values + static_cast<int64_t>(y) * width);
  for (int32_t y = t.end; y < height; ++y)
    gather_simple(bottom_row, c, values + static_cast<int64_t>(y) * width);
}

// Zero padding written by the gather itself (SampleGeometry::gather_zeros):
// rows with rows[y] set are zeros, and in every other row the first `left`
// and the last `right` columns. rows == nullptr: none.
struct GatherZeros {
  const uint8_t* rows = nullptr;
  int32_t left = 0, right = 0;
};

template <typename T>
inline void zero_edges(T* row, int32_t n, const GatherZeros& zeros) {
  if (zeros.left) fill_edge(row, n, zeros.left, T(0), false);
  if (zeros.right) fill_edge(row, n, zeros.right, T(0), true);
}

// Whether gather_rows_avx2 can write rows of this shape: uint8 rows of at
// least 64 bytes whose edge runs (zero padding included) are at most 32
// bytes, with a middle of at least 32.
bool rows_as_vectors(const SimpleColumns& c, const GatherZeros& zeros, int32_t width) {
  const int32_t mid_end = c.mid_dst + c.mid_len;
  return width >= 64 && c.left_len <= 32 && c.right_len <= 32 && c.mid_len >= 32 &&
         c.mid_dst == c.left_len &&
         (c.right_len == 0 ? mid_end == width
                           : c.right_dst == mid_end && mid_end + c.right_len == width) &&
         zeros.left <= c.left_len && zeros.right <= c.right_len &&
         (zeros.left == 0 || c.left_len > 0) && (zeros.right == 0 || c.right_len > 0);
}

// gather_plane for the simple shape with whole vectors: per row one 32-byte
// store of the left value at the row's start and one of the right value at
// its end (their zero-padding bytes masked to 0), then the middle copied or
// mirrored by 32 bytes, the last move overlapping; the middle overwrites
// what the edge stores spill. A middle of at most four vectors (84-pixel
// frames: three) is loaded whole before the row's first store, so a row may
// read itself in place with no copy. At 84 pixels a row's instructions, not
// its bytes, are what the gather costs: about 65 per row here against about
// 130 in the generic loop (callgrind, 88-pixel rows with zero padding).
template <bool kMirrored>
__attribute__((target("avx2"))) inline __m256i middle_vector(const uint8_t* src,
                                                             const SimpleColumns& c, int32_t x) {
  if (!kMirrored) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c.mid_src + x));
  // d[x] = src[mid_src - x]: bytes reversed within each 128-bit lane, then the lanes swapped
  const __m256i reverse = _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15,
                                           14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c.mid_src - 31 - x));
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, reverse), 0x4E);
}

// The rows of one plane (see gather_rows_avx2), with the middle mirrored or
// not; kVectors 3 or 4: a middle of at most 96 or 128 bytes, loaded whole
// before the row's first store; 0: longer, moved 32 bytes at a time (in
// place, from a copy of the row when it reads itself).
template <bool kMirrored, int kVectors>
__attribute__((target("avx2"))) inline void gather_rows_by_vectors(
    const uint8_t* in, int64_t in_w, const int32_t* row_source, int32_t out_h, int32_t out_w,
    const SimpleColumns& columns, uint8_t* values, int row_order, uint8_t* row_scratch,
    const GatherZeros& zeros, ReadAhead ahead) {
  // a copy, as `ahead` is: the byte stores could alias the caller's
  const SimpleColumns c = columns;
  const uint8_t* zero_rows = zeros.rows;
  const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                        17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
  // byte i of the left store is column i, of the right store column out_w - 32 + i
  const __m256i keep_left =
      _mm256_cmpgt_epi8(iota, _mm256_set1_epi8(static_cast<char>(zeros.left - 1)));
  const __m256i keep_right =
      _mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(32 - zeros.right)), iota);
  const int32_t last = c.mid_len - 32;
  const int32_t at1 = std::min(32, last);
  const int32_t at2 = std::min(64, last);
  const int32_t step = row_order < 0 ? -1 : 1;
  int32_t y = row_order < 0 ? out_h - 1 : 0;
  for (int32_t i = 0; i < out_h; ++i, y += step) {
    const uint8_t* src = in + row_source[y] * in_w;
    uint8_t* dst = values + static_cast<int64_t>(y) * out_w;
    uint8_t* mid = dst + c.mid_dst;
    ahead.row();
    if (zero_rows != nullptr && zero_rows[y]) {
      const __m256i zero = _mm256_setzero_si256();
      for (int32_t x = 0; x + 32 < out_w; x += 32)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + x), zero);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + out_w - 32), zero);
      continue;
    }
    const __m256i left =
        _mm256_and_si256(_mm256_set1_epi8(static_cast<char>(src[c.left_src])), keep_left);
    const __m256i right =
        _mm256_and_si256(_mm256_set1_epi8(static_cast<char>(src[c.right_src])), keep_right);
    if (kVectors > 0) {
      const __m256i m0 = middle_vector<kMirrored>(src, c, 0);
      const __m256i m1 = middle_vector<kMirrored>(src, c, at1);
      const __m256i m2 = kVectors == 4 ? middle_vector<kMirrored>(src, c, at2) : m0;
      const __m256i m3 = middle_vector<kMirrored>(src, c, last);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), left);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + out_w - 32), right);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid), m0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid + at1), m1);
      if (kVectors == 4) _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid + at2), m2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid + last), m3);
      continue;
    }
    if (row_scratch != nullptr && src == dst) {
      std::memcpy(row_scratch, src, static_cast<size_t>(in_w));
      src = row_scratch;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), left);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + out_w - 32), right);
    for (int32_t x = 0; x < last; x += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid + x), middle_vector<kMirrored>(src, c, x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(mid + last),
                        middle_vector<kMirrored>(src, c, last));
  }
}

template <bool kMirrored>
__attribute__((target("avx2"))) inline void gather_rows_mirrored_or_not(
    const uint8_t* in, int64_t in_w, const int32_t* row_source, int32_t out_h, int32_t out_w,
    const SimpleColumns& c, uint8_t* values, int row_order, uint8_t* row_scratch,
    const GatherZeros& zeros, ReadAhead& ahead) {
  if (c.mid_len <= 96) {
    gather_rows_by_vectors<kMirrored, 3>(in, in_w, row_source, out_h, out_w, c, values, row_order,
                                         row_scratch, zeros, ahead);
  } else if (c.mid_len <= 128) {
    gather_rows_by_vectors<kMirrored, 4>(in, in_w, row_source, out_h, out_w, c, values, row_order,
                                         row_scratch, zeros, ahead);
  } else {
    gather_rows_by_vectors<kMirrored, 0>(in, in_w, row_source, out_h, out_w, c, values, row_order,
                                         row_scratch, zeros, ahead);
  }
}

__attribute__((target("avx2"))) void gather_rows_avx2(const uint8_t* in, int64_t in_w,
                                                      const int32_t* row_source, int32_t out_h,
                                                      int32_t out_w, const SimpleColumns& c,
                                                      uint8_t* values, int row_order,
                                                      uint8_t* row_scratch,
                                                      const GatherZeros& zeros,
                                                      ReadAhead& ahead) {
  if (c.mid_mirrored) {
    gather_rows_mirrored_or_not<true>(in, in_w, row_source, out_h, out_w, c, values, row_order,
                                      row_scratch, zeros, ahead);
  } else {
    gather_rows_mirrored_or_not<false>(in, in_w, row_source, out_h, out_w, c, values, row_order,
                                       row_scratch, zeros, ahead);
  }
}

// Gathers every output row of one plane: row y of `values` takes input row
// row_source[y] through `plan`, then gets `zeros`. In place (row_scratch
// given), rows are written in `row_order` and a row that reads itself is
// copied to row_scratch first.
template <typename T>
OBSAUG_CLONES void gather_plane(const T* in, int64_t in_w, const int32_t* row_source, int32_t out_h,
                                int32_t out_w, const ColumnPlan& plan, T* values, int row_order,
                                T* row_scratch, const GatherZeros& zeros,
                                ReadAhead& ahead) {
  const bool simple = plan.simple;
  const SimpleColumns c = plan.shape;
  if constexpr (std::is_same<T, uint8_t>::value) {
    if (kHasAvx2 && simple && rows_as_vectors(c, zeros, out_w)) {
      gather_rows_avx2(in, in_w, row_source, out_h, out_w, c, values, row_order, row_scratch,
                       zeros, ahead);
      return;
    }
  }
  const bool blocks = simple && fills_as_blocks<T>(c, out_w);
  const int64_t mid_bytes = static_cast<int64_t>(sizeof(T)) * c.mid_len;
  for (int32_t i = 0; i < out_h; ++i) {
    const int32_t y = row_order < 0 ? out_h - 1 - i : i;
    ahead.row();
    const T* src = in + row_source[y] * in_w;
    T* dst = values + static_cast<int64_t>(y) * out_w;
    if (zeros.rows != nullptr && zeros.rows[y]) {
      std::memset(dst, 0, sizeof(T) * out_w);
      continue;
    }
    if (row_scratch != nullptr && src == dst) {
      std::memcpy(row_scratch, src, sizeof(T) * in_w);
      src = row_scratch;
    }
    if (!simple) {
      gather_runs(src, plan.runs, dst);
      zero_edges(dst, out_w, zeros);
      continue;
    }
    const T left = src[c.left_src];
    const T right = src[c.right_src];
    if (blocks) {
      if (c.left_len) fill_block(dst, left);
      if (c.right_len)
        fill_block(dst + out_w - kFillBytes / static_cast<int64_t>(sizeof(T)), right);
    } else {
      for (int32_t x = 0; x < c.left_len; ++x) dst[x] = left;
      for (int32_t x = 0; x < c.right_len; ++x) dst[c.right_dst + x] = right;
    }
    if (c.mid_mirrored) {
      mirror_elems(dst + c.mid_dst, src + c.mid_src, c.mid_len);
    } else {
      copy_bytes(reinterpret_cast<unsigned char*>(dst + c.mid_dst),
                 reinterpret_cast<const unsigned char*>(src + c.mid_src), mid_bytes);
    }
    zero_edges(dst, out_w, zeros);
  }
}

template <typename T>
OBSAUG_CLONES void blend_span(T* __restrict v, const uint8_t* __restrict d, int64_t n,
                              uint32_t weight) {
  for (int64_t x = 0; x < n; ++x) v[x] = blend(v[x], d[x], weight);
}

// The uint8 blend, vectorized: an exact rewrite of blend() in pipeline.h,
//   (x*(256-w) + d*w + 128) >> 8 == x + floor(((d-x)*w + 128) / 256)
//                                == x + mulhrs(d - x, w << 7)   for w <= 255,
// because mulhrs(a, b) = (a*b + 2^14) >> 15 with a 32-bit product; at w ==
// 128 it is (x + d + 1) >> 1, one pavgb; w == 256 is the distractor itself.
// The bytes widen to 16-bit lanes by unpacking with zero inside each 128-bit
// lane, which packus undoes in the same order. tests/kernels/test_augment.cpp
// checks every (x, d, w) against blend() with each set of loops the CPU has.
__attribute__((target("avx2"))) inline __m256i blend_32(__m256i x, __m256i d, __m256i w) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i x_lo = _mm256_unpacklo_epi8(x, zero);
  const __m256i x_hi = _mm256_unpackhi_epi8(x, zero);
  const __m256i d_lo = _mm256_unpacklo_epi8(d, zero);
  const __m256i d_hi = _mm256_unpackhi_epi8(d, zero);
  return _mm256_packus_epi16(
      _mm256_add_epi16(x_lo, _mm256_mulhrs_epi16(_mm256_sub_epi16(d_lo, x_lo), w)),
      _mm256_add_epi16(x_hi, _mm256_mulhrs_epi16(_mm256_sub_epi16(d_hi, x_hi), w)));
}

__attribute__((target("avx2"))) void blend_bytes_avx2(uint8_t* __restrict v,
                                                      const uint8_t* __restrict d, int64_t n,
                                                      uint32_t weight) {
  int64_t i = 0;
  if (weight == kWeightOne / 2) {
    for (; i + 32 <= n; i += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i));
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), _mm256_avg_epu8(x, y));
    }
    if (i + 16 <= n) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i));
      const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(v + i), _mm_avg_epu8(x, y));
      i += 16;
    }
  } else {
    const __m256i w = _mm256_set1_epi16(static_cast<int16_t>(weight << 7));
    for (; i + 32 <= n; i += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i));
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), blend_32(x, y, w));
    }
  }
  for (; i < n; ++i) v[i] = blend(v[i], d[i], weight);
}

// The same with AVX-512 (its F and BW parts), 64 bytes a step.
#define OBSAUG_AVX512 __attribute__((target("avx512f,avx512bw")))

OBSAUG_AVX512 inline __m512i blend_64(__m512i x, __m512i d, __m512i w) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i x_lo = _mm512_unpacklo_epi8(x, zero);
  const __m512i x_hi = _mm512_unpackhi_epi8(x, zero);
  const __m512i d_lo = _mm512_unpacklo_epi8(d, zero);
  const __m512i d_hi = _mm512_unpackhi_epi8(d, zero);
  return _mm512_packus_epi16(
      _mm512_add_epi16(x_lo, _mm512_mulhrs_epi16(_mm512_sub_epi16(d_lo, x_lo), w)),
      _mm512_add_epi16(x_hi, _mm512_mulhrs_epi16(_mm512_sub_epi16(d_hi, x_hi), w)));
}

// x blended with d: one pavgb at w == 128 (kHalf), else blend_64.
template <bool kHalf>
OBSAUG_AVX512 inline __m512i mix_64(__m512i x, __m512i d, __m512i w) {
  return kHalf ? _mm512_avg_epu8(x, d) : blend_64(x, d, w);
}

// The first n (< 64) bytes at v, by masked loads and stores: the bytes past n
// are neither read (a masked-off byte does not fault) nor written.
template <bool kHalf>
OBSAUG_AVX512 inline void blend_masked_64(uint8_t* v, const uint8_t* d, int64_t n, __m512i w) {
  const __mmask64 mask = (uint64_t{1} << n) - 1;
  const __m512i x = _mm512_maskz_loadu_epi8(mask, v);
  _mm512_mask_storeu_epi8(v, mask, mix_64<kHalf>(x, _mm512_maskz_loadu_epi8(mask, d), w));
}

// The stores are aligned to 64 bytes, the bytes before the first aligned one
// and the tail masked: an unaligned 64-byte store always writes two cache
// lines, and with them the blend of an 84 x 84 plane in the L1 cache took
// 1.2-1.4x as long (BENCHMARKS.md, "An AVX-512 blend").
template <bool kHalf>
OBSAUG_AVX512 void blend_bytes_avx512(uint8_t* __restrict v, const uint8_t* __restrict d, int64_t n,
                                      uint32_t weight) {
  const __m512i w = _mm512_set1_epi16(static_cast<int16_t>(weight << 7));
  int64_t i = std::min<int64_t>(n, (64 - reinterpret_cast<uintptr_t>(v) % 64) % 64);
  if (i > 0) blend_masked_64<kHalf>(v, d, i, w);
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_load_si512(v + i);
    _mm512_store_si512(v + i, mix_64<kHalf>(x, _mm512_loadu_si512(d + i), w));
  }
  if (i < n) blend_masked_64<kHalf>(v + i, d + i, n - i, w);
}

#undef OBSAUG_AVX512

void blend_bytes_with(CpuLoops loops, uint8_t* __restrict v, const uint8_t* __restrict d, int64_t n,
                      uint32_t weight) {
  if (weight == kWeightOne) {  // the distractor itself
    copy_plane_bytes(v, d, static_cast<size_t>(n));
  } else if (loops == CpuLoops::kAvx512) {
    if (weight == kWeightOne / 2) {
      blend_bytes_avx512<true>(v, d, n, weight);
    } else {
      blend_bytes_avx512<false>(v, d, n, weight);
    }
  } else if (loops == CpuLoops::kAvx2) {
    blend_bytes_avx2(v, d, n, weight);
  } else {
    for (int64_t x = 0; x < n; ++x) v[x] = blend(v[x], d[x], weight);
  }
}

template <>
void blend_span<uint8_t>(uint8_t* __restrict v, const uint8_t* __restrict d, int64_t n,
                         uint32_t weight) {
  blend_bytes_with(kLoops, v, d, n, weight);
}

template <typename In, typename Out>
OBSAUG_CLONES void store_span(const In* __restrict v, Out* __restrict out, int64_t n, float scale,
                              float bias) {
  for (int64_t x = 0; x < n; ++x) out[x] = to_output(v[x], scale, bias, static_cast<Out*>(nullptr));
}

// Eight values as float32 (AVX2): uint8 widened, float32 loaded.
__attribute__((target("avx2"))) inline __m256 eight_floats(const uint8_t* v) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v))));
}
__attribute__((target("avx2"))) inline __m256 eight_floats(const float* v) {
  return _mm256_loadu_ps(v);
}

// store_span to a float32 output that is streamed (kernels/streaming_stores.h):
// 16 values at a time converted (v * scale, then + bias: to_output's two
// roundings) and written with two non-temporal 32-byte stores, rather
// than converted into scratch and then copied out (measured 1.2-1.4x as
// long, BENCHMARKS.md "Float32 outputs converted as they are streamed");
// the ends with plain stores. [ahead, ahead + ahead_bytes), what the caller
// reads next, is prefetched over the stores (LinePrefetch).
template <typename In>
__attribute__((target("avx2"))) void stream_span_avx2(const In* v, float* out, int64_t n,
                                                      float scale, float bias, const void* ahead,
                                                      int64_t ahead_bytes) {
  LinePrefetch prefetch(ahead, ahead_bytes, n * static_cast<int64_t>(sizeof(float)));
  int64_t i = std::min<int64_t>(n, ((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / 4);
  store_span(v, out, i, scale, bias);  // `out` 4-byte aligned: up to a 32-byte boundary
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 b = _mm256_set1_ps(bias);
  for (; i + 16 <= n; i += 16) {
    prefetch.line();
    const __m256 lo = eight_floats(v + i);
    const __m256 hi = eight_floats(v + i + 8);
    _mm256_stream_ps(out + i, _mm256_add_ps(_mm256_mul_ps(lo, s), b));
    _mm256_stream_ps(out + i + 8, _mm256_add_ps(_mm256_mul_ps(hi, s), b));
  }
  store_span(v + i, out + i, n - i, scale, bias);
  prefetch.finish();
}

// Whether coordinates at the output of op k (k = -1: the pipeline's input)
// lie on the other axis than the output's: an odd number of quarter turns
// after op k (trace_range's rotate case).
bool swapped_after(const PipelineDesc& p, const OpDraw* draws, int k) {
  bool swapped = false;
  for (int j = k + 1; j < p.n_ops; ++j) {
    if (p.ops[j].kind == OpKind::kRotate && draws[j].gate && draws[j].quarter != 2)
      swapped = !swapped;
  }
  return swapped;
}

// grayscale_value of 16 pixels with AVX2, as 16-bit lanes in order. Exact:
// 38470 g does not fit a signed 16-bit factor, so the sum is taken as two
// pmaddwd of pairs, (r, g) . (19595, 19235) + (g, b) . (19235, 7471), with
// 2 * 19235 = 38470 (GrayBytes.MatchesGrayscaleValueForEveryInput).
__attribute__((target("avx2"))) inline __m256i gray16_avx2(const uint8_t* r, const uint8_t* g,
                                                           const uint8_t* b) {
  const __m256i w_rg = _mm256_set1_epi32((19235 << 16) | 19595);
  const __m256i w_gb = _mm256_set1_epi32((7471 << 16) | 19235);
  const __m256i half = _mm256_set1_epi32(32768);
  const __m256i r16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
  const __m256i g16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
  const __m256i b16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  // pixels 0-3 and 8-11 (unpacklo), 4-7 and 12-15 (unpackhi); packus_epi32 restores the order
  const __m256i lo =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(r16, g16), w_rg),
                                        _mm256_madd_epi16(_mm256_unpacklo_epi16(g16, b16), w_gb)),
                       half);
  const __m256i hi =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(r16, g16), w_rg),
                                        _mm256_madd_epi16(_mm256_unpackhi_epi16(g16, b16), w_gb)),
                       half);
  return _mm256_packus_epi32(_mm256_srli_epi32(lo, 16), _mm256_srli_epi32(hi, 16));
}

// The first multiple of 32 pixels of gray_planes; returns how many.
__attribute__((target("avx2"))) int64_t gray_bytes_avx2(uint8_t* __restrict r,
                                                        uint8_t* __restrict g,
                                                        uint8_t* __restrict b, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(gray16_avx2(r + i, g + i, b + i),
                            gray16_avx2(r + i + 16, g + i + 16, b + i + 16)),
        0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + i), v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + i), v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), v);
  }
  return i;
}

// grayscale over the three planes of a frame, n pixels each.
template <typename T>
OBSAUG_CLONES void gray_planes(T* __restrict r, T* __restrict g, T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T gray = grayscale_value(r[i], g[i], b[i]);
    r[i] = gray;
    g[i] = gray;
    b[i] = gray;
  }
}

template <>
void gray_planes<uint8_t>(uint8_t* __restrict r, uint8_t* __restrict g, uint8_t* __restrict b,
                          int64_t n) {
  for (int64_t i = kHasAvx2 ? gray_bytes_avx2(r, g, b, n) : 0; i < n; ++i)
    r[i] = g[i] = b[i] = grayscale_value(r[i], g[i], b[i]);
}

// Columns [first, end) of a row, as elements and as bytes.
struct Span {
  int32_t first, end;  // elements
  int32_t begin_byte, end_byte;
};

// Adds column x, in increasing order, to a list of spans.
void add_to_spans(int32_t x, std::vector<Span>* spans) {
  if (spans->empty() || spans->back().end != x)
    spans->push_back(Span{x, x + 1, 0, 0});
  else
    ++spans->back().end;
}

// Fills in the byte fields of `spans` for elements of `size` bytes.
void plan_spans(int32_t size, std::vector<Span>* spans) {
  for (Span& span : *spans) {
    span.begin_byte = span.first * size;
    span.end_byte = span.end * size;
  }
}

// Sets every span of a row to the value whose fill_pattern is `pattern`.
template <typename T>
void fill_spans(T* row, const std::vector<Span>& spans, uint64_t pattern) {
  unsigned char* bytes = reinterpret_cast<unsigned char*>(row);
  for (const Span& span : spans)
    fill_bytes(bytes + span.begin_byte, span.end_byte - span.begin_byte, pattern);
}

// Everything about one sample's geometry that every plane and row reuses.
struct SampleGeometry {
  AxisTraces rows;                     // [out_h]
  std::vector<int32_t> row_source;     // [out_h] rows.source (see fill_blanked)
  ColumnPlan source_columns;           // columns of the pipeline's input
  std::vector<ColumnPlan> op_columns;  // [n_ops] pool columns each overlay reads
  std::vector<bool> op_identity;       // overlay reads pool pixel (y, x) for output (y, x)
  // Quarter turns: output pixel (y, x) reads input pixel (col source, row
  // source), i.e. the transposed input plane at (row source, col source);
  // the same for an overlay's pool pixels when op_swapped[k].
  bool source_swapped = false;
  bool op_swapped[kMaxOps] = {};
  // cutout k: the spans of output rows whose coordinates at op k fall in its
  // rectangle (only first / end set), and the spans of such columns (a pixel
  // is inside when both are).
  std::vector<Span> cut_rows[kMaxOps];
  std::vector<Span> cut_spans[kMaxOps];
  // Zero padding (shift with zeros, translate) k blanks, on rows whose own
  // zero_op is below k, the columns [first, end) of zero_spans[k]; rows with
  // zero_op == k are blanked whole.
  std::vector<Span> zero_spans[kMaxOps];
  bool source_identity = false;  // output pixel (y, x) reads input pixel (y, x)
  // In place, rows must be written in an order that never overwrites a row
  // another output row still reads: +1 top-down (every row reads itself or
  // a row below), -1 bottom-up, 0 neither (then the plane is copied first).
  int row_order = 0;
  RowTranslation translation;  // valid when the translation path applies
  // The gather writes every zero padding itself when gather_zeros.rows is set (the zero ops
  // then have nothing left to do): when the gathered plane is the state
  // after the last zero op (zeros_first), the gather runs by rows
  // (gather_plane) and the zero columns are a prefix and a suffix.
  GatherZeros gather_zeros;

  // `elem_size`: bytes per pixel of the planes the spans fill; `zeros_first`:
  // no value op comes before a zero-padding op.
  void build(const PipelineDesc& p, const OpDraw* draws, int32_t elem_size, bool zeros_first,
             bool in_place) {
    trace_axis_all(p, draws, 0, p.out_h, &rows);
    row_source = rows.source;
    trace_axis_all(p, draws, 1, p.out_w, &cols);
    coords = cols.source;
    fill_blanked(rows.zero_op, &row_source);
    fill_blanked(cols.zero_op, &coords);
    for (int k = 0; k < p.n_ops; ++k) {
      zero_spans[k].clear();
      if (!p.ops[k].zeros && p.ops[k].kind != OpKind::kTranslate) continue;
      for (int32_t x = 0; x < p.out_w; ++x) {
        if (cols.zero_op[x] == k) add_to_spans(x, &zero_spans[k]);
      }
      plan_spans(elem_size, &zero_spans[k]);
    }
    source_swapped = swapped_after(p, draws, -1);
    for (int k = 0; k < p.n_ops; ++k) op_swapped[k] = swapped_after(p, draws, k);
    source_columns.assign(coords);
    const std::vector<Run>& source_runs = source_columns.runs;
    bool reads_below = true;
    bool reads_above = true;
    source_identity = !source_swapped && p.out_h == p.in_h && p.out_w == p.in_w &&
                      source_runs.size() == 1 && source_runs[0].copy() && source_runs[0].src_x == 0;
    for (int32_t y = 0; y < p.out_h; ++y) {
      reads_below = reads_below && rows.source[y] >= y;
      reads_above = reads_above && rows.source[y] <= y;
      source_identity = source_identity && rows.source[y] == y;
    }
    row_order = reads_below ? 1 : (reads_above ? -1 : 0);
    translation = RowTranslation();
    if (!source_swapped && p.in_h == p.out_h && p.in_w == p.out_w && source_columns.simple &&
        !source_columns.shape.mid_mirrored) {
      translation = find_translation(row_source, p.in_h);
    }
    op_columns.resize(p.n_ops);
    op_identity.assign(p.n_ops, false);
    for (int k = 0; k < p.n_ops; ++k) {
      if (p.ops[k].kind == OpKind::kCutout) build_cutout(p, k, draws[k], elem_size);
      if (p.ops[k].kind != OpKind::kOverlay) continue;
      bool identity = !op_swapped[k] && p.ops[k].out_h == p.out_h && p.ops[k].out_w == p.out_w;
      for (int32_t x = 0; x < p.out_w; ++x) {
        coords[x] = cols.at_op[k][x];
        identity = identity && coords[x] == x;
      }
      for (int32_t y = 0; y < p.out_h && identity; ++y) identity = rows.at_op[k][y] == y;
      op_identity[k] = identity;
      if (!identity) op_columns[k].assign(coords);
    }
    plan_gather_zeros(zeros_first && !(in_place && source_identity));
    // uint8 rows that gather_rows_avx2 writes cost fewer instructions by rows
    // than as one translated block with its edges fixed row by row
    if (translation.valid && elem_size == 1 && kHasAvx2 &&
        rows_as_vectors(source_columns.shape, gather_zeros, p.out_w)) {
      translation.valid = false;
    }
    if (translation.valid) gather_zeros = GatherZeros();
  }

  // Whether output column x reads input column clamp(x + *shift, 0, w - 1)
  // for every x, the input as wide as the output (stream_translated_plane).
  bool columns_are_shift(const PipelineDesc& p, int32_t* shift) const {
    const int32_t w = p.out_w;
    if (source_swapped || p.in_w != w || static_cast<int32_t>(coords.size()) != w) return false;
    *shift = coords[w / 2] - w / 2;
    for (int32_t x = 0; x < w; ++x)
      if (coords[x] != std::min(std::max(x + *shift, 0), w - 1)) return false;
    return true;
  }

 private:
  // Pixels that zero padding blanks read a neighbour's source instead of
  // their traced 0 (any valid read does: the padding op overwrites them), so
  // that the runs stay [repeat][copy][repeat].
  static void fill_blanked(const std::vector<int32_t>& zero_op, std::vector<int32_t>* coords) {
    const int32_t n = static_cast<int32_t>(zero_op.size());
    int32_t first = 0;
    while (first < n && zero_op[first] >= 0) ++first;
    if (first == n) return;
    for (int32_t i = 0; i < n; ++i) {
      if (zero_op[i] < 0) continue;
      (*coords)[i] = i < first ? (*coords)[first] : (*coords)[i - 1];
    }
  }

  void build_cutout(const PipelineDesc& p, int k, const OpDraw& d, int32_t elem_size) {
    // A row trace's coordinate at op k is a column there when swapped.
    const bool swapped = op_swapped[k];
    const auto inside = [](int32_t c, int32_t first, int32_t len) {
      return static_cast<uint8_t>(c >= first && c < first + len);
    };
    cut_rows[k].clear();
    cut_spans[k].clear();
    if (!d.gate) return;
    for (int32_t y = 0; y < p.out_h; ++y) {
      const bool in = swapped ? inside(rows.at_op[k][y], d.offset_x, d.size_x)
                              : inside(rows.at_op[k][y], d.offset_y, d.size_y);
      if (in) add_to_spans(y, &cut_rows[k]);
    }
    for (int32_t x = 0; x < p.out_w; ++x) {
      const bool in = swapped ? inside(cols.at_op[k][x], d.offset_y, d.size_y)
                              : inside(cols.at_op[k][x], d.offset_x, d.size_x);
      if (in) add_to_spans(x, &cut_spans[k]);
    }
    plan_spans(elem_size, &cut_spans[k]);
  }

  void plan_gather_zeros(bool gathered_by_rows) {
    gather_zeros = GatherZeros();
    if (!gathered_by_rows) return;
    const int32_t w = static_cast<int32_t>(cols.zero_op.size());
    int32_t left = 0, right = 0;
    while (left < w && cols.zero_op[left] >= 0) ++left;
    while (right < w - left && cols.zero_op[w - 1 - right] >= 0) ++right;
    for (int32_t x = left; x < w - right; ++x)
      if (cols.zero_op[x] >= 0) return;  // a zero column inside: the zero ops blank it
    row_zero.resize(rows.zero_op.size());
    for (size_t y = 0; y < row_zero.size(); ++y) row_zero[y] = rows.zero_op[y] >= 0;
    gather_zeros.rows = row_zero.data();
    gather_zeros.left = left;
    gather_zeros.right = right;
  }

  AxisTraces cols;  // build() scratch, kept to reuse its storage
  std::vector<int32_t> coords;
  std::vector<uint8_t> row_zero;
};

// The SampleGeometry of each distinct set of geometric draws, built once and
// shared by the samples that drew the same, in this call and in the
// following calls of the same pipeline. A shift of pad 4 has 81 such sets;
// each sample built its own before, and build() was 13.6% of the
// instructions of an in-place shift+overlay call at B = 256, 84x84; called
// again and again, that pipeline now builds none (BENCHMARKS.md, "Sample
// geometries shared"). The key is every field of the draws that build()
// reads (offsets, sizes, gate, quarter turns); the value-only fields (pool
// image, weight, colour, jitter factors) stay out, so samples that differ
// only there share. A pipeline whose draws can make more than kMaxEntries
// keys (any cutout: a rectangle per sample) shares nothing: each sample's
// geometry is built into the same one, as without a cache.
// One per thread (geometry_cache()), holding at most kMaxEntries geometries
// and about kMaxBytes.
// What build() reads besides the draws (the pipeline without its seed and
// step, the element size, zeros_first, in place) is the call's shape; a
// call of another shape forgets every key.
class GeometryCache {
 public:
  // Starts a chunk of a call. Without sharing (more keys than kMaxEntries)
  // most samples would have a key of their own, and a cache would only
  // spread the same builds over more memory.
  void start(const PipelineDesc& p, int32_t elem_size, bool zeros_first, bool in_place) {
    CallShape shape;
    std::memset(&shape, 0, sizeof shape);  // padding too: shapes compare as bytes
    std::memcpy(&shape.pipeline, &p, sizeof p);
    shape.pipeline.seed = 0;
    shape.pipeline.step = 0;
    shape.elem_size = elem_size;
    shape.zeros_first = zeros_first;
    shape.in_place = in_place;
    // Bytes that differ only in padding make a needless reset, never a wrong share.
    if (used_ > 0 && std::memcmp(&shape, &shape_, sizeof shape) == 0) return;
    std::memcpy(&shape_, &shape, sizeof shape);
    used_ = 0;
    slots_.fill(kEmpty);
    const int64_t keys = geometric_keys(p);
    shared_ = keys <= static_cast<int64_t>(kMaxEntries) && keys * geometry_bytes(p) <= kMaxBytes;
  }

  // About the memory one geometry of `p` holds: its row and column traces
  // (source, zero_op, one coordinate per op, int32) and as much again in
  // derived arrays.
  static int64_t geometry_bytes(const PipelineDesc& p) {
    return 2 * int64_t{4} * (2 + p.n_ops) * (int64_t{p.out_h} + p.out_w);
  }

  // How many distinct keys the draws of `p` can make (an upper bound, capped
  // just past kMaxEntries): per op, the number of values of its geometric
  // draw fields (draw_op in kernels/pipeline.h).
  static int64_t geometric_keys(const PipelineDesc& p) {
    const int64_t cap = static_cast<int64_t>(kMaxEntries) + 1;
    int64_t keys = 1;
    for (int k = 0; k < p.n_ops && keys < cap; ++k) {
      const OpDesc& op = p.ops[k];
      int64_t values = 1;
      switch (op.kind) {
        case OpKind::kShift:
          values = (2 * int64_t{op.pad} + 1) * (2 * int64_t{op.pad} + 1);
          break;
        case OpKind::kCrop:
          if (!op.center) values = int64_t{op.in_w - op.out_w + 1} * (op.in_h - op.out_h + 1);
          break;
        case OpKind::kTranslate:
          values = int64_t{op.out_w - op.in_w + 1} * (op.out_h - op.in_h + 1);
          break;
        case OpKind::kRotate:
          values = 2 * 3;  // gate, quarter turns
          break;
        case OpKind::kCutout:
          values = cap;  // a rectangle per sample
          break;
        case OpKind::kFlip:
        case OpKind::kGrayscale:
        case OpKind::kColorJitter:
          values = 2;  // gate
          break;
        default:
          break;
      }
      keys = values >= cap ? cap : std::min(cap, keys * values);
    }
    return keys;
  }

  // The geometry of one sample's draws, for the call start() was given.
  const SampleGeometry& get(const PipelineDesc& p, const OpDraw* draws) {
    if (!shared_) return build(p, draws, &alone_);
    Key key{};
    const int n = p.n_ops * kFields;
    for (int k = 0; k < p.n_ops; ++k) {
      const OpDraw& d = draws[k];
      const int32_t fields[kFields] = {d.offset_x, d.offset_y, d.gate,
                                       d.quarter,  d.size_x,   d.size_y};
      std::copy(fields, fields + kFields, key.begin() + k * kFields);
    }
    uint64_t hash = 1469598103934665603ull;  // FNV-1a over the fields
    for (int i = 0; i < n; ++i) hash = (hash ^ static_cast<uint32_t>(key[i])) * 1099511628211ull;
    size_t slot = static_cast<size_t>(hash ^ (hash >> 32)) % kSlots;
    for (; slots_[slot] != kEmpty; slot = (slot + 1) % kSlots) {
      Entry& entry = *entries_[slots_[slot]];
      if (std::equal(key.begin(), key.begin() + n, entry.key.begin())) return entry.geometry;
    }
    SampleGeometry* geometry = &alone_;  // a guard: geometric_keys() bounds the keys
    if (used_ < kMaxEntries) {
      if (used_ == entries_.size()) entries_.push_back(std::make_unique<Entry>());
      Entry& entry = *entries_[used_];
      entry.key = key;
      slots_[slot] = static_cast<int16_t>(used_++);
      geometry = &entry.geometry;
    }
    return build(p, draws, geometry);
  }

 private:
  static constexpr int kFields = 6;
  static constexpr size_t kMaxEntries = 256;
  // The memory a thread's geometries may take, by geometry_bytes(): 81
  // geometries of a shift of pad 4 and an overlay on 84x84 frames come to
  // 0.44 MB; large frames with many keys build per sample instead.
  static constexpr int64_t kMaxBytes = int64_t{4} << 20;
  static constexpr size_t kSlots = 2 * kMaxEntries;  // open addressing, at most half full
  static constexpr int16_t kEmpty = -1;
  // A new OpDraw field: decide whether build() reads it, and if so add it
  // to the key above.
  static_assert(sizeof(OpDraw) == 15 * 4, "OpDraw changed: review GeometryCache's key");

  const SampleGeometry& build(const PipelineDesc& p, const OpDraw* draws, SampleGeometry* into) {
    into->build(p, draws, shape_.elem_size, shape_.zeros_first, shape_.in_place);
    return *into;
  }
  using Key = std::array<int32_t, kFields * kMaxOps>;
  struct CallShape {
    PipelineDesc pipeline;  // seed and step 0
    int32_t elem_size;
    bool zeros_first;
    bool in_place;
  };
  struct Entry {
    Key key;
    SampleGeometry geometry;
  };
  std::vector<std::unique_ptr<Entry>> entries_;  // the first used_ hold shape_'s geometries
  CallShape shape_{};
  bool shared_ = false;
  size_t used_ = 0;
  std::array<int16_t, kSlots> slots_{};  // index into entries_, or kEmpty
  SampleGeometry alone_;
};

GeometryCache& geometry_cache() {
  thread_local GeometryCache cache;
  return cache;
}

// Per-thread scratch.
template <typename In>
struct Scratch {
  std::vector<uint8_t> pool_row;
  std::vector<uint8_t> pool_cells;  // a transposed pool plane
  std::vector<In> rows;             // two rows
  std::vector<In> edges;            // two values per row
  std::vector<In> in_plane;         // the input plane (in place) or its transpose
  std::vector<In> values;           // the planes of a unit, when not written directly
  std::vector<float> jitter_rows;   // color_jitter's three rows of floats
};

// Zero padding op k on one plane of the output layout.
template <typename T>
void blank(const SampleGeometry& geometry, int k, int32_t h, int32_t w, T* values) {
  for (int32_t y = 0; y < h; ++y) {
    T* row = values + static_cast<int64_t>(y) * w;
    const int32_t row_zero = geometry.rows.zero_op[y];
    if (row_zero == k) {
      std::memset(row, 0, sizeof(T) * w);
    } else if (row_zero < k) {
      fill_spans(row, geometry.zero_spans[k], 0);
    }
  }
}

bool has_barrier(const PipelineDesc& p) {
  for (int k = 0; k < p.n_ops; ++k)
    if (is_barrier(p.ops[k])) return true;
  return false;
}

// Writes the output layout of input plane `in` (the geometric ops) into `values`.
template <typename In>
void gather_source(const PipelineDesc& p, const SampleGeometry& geometry, const In* in,
                   bool in_place, In* values, Scratch<In>* scratch, ReadAhead& ahead) {
  if (geometry.source_swapped) {
    transpose_plane(in, p.in_h, p.in_w, scratch->in_plane.data());
    gather_plane(scratch->in_plane.data(), p.in_h, geometry.row_source.data(), p.out_h, p.out_w,
                 geometry.source_columns, values, 1, static_cast<In*>(nullptr),
                 geometry.gather_zeros, ahead);
  } else if (in_place && geometry.source_identity) {
    // nothing to move
  } else if (geometry.translation.valid) {
    translate_plane(in, p.out_h, p.out_w, geometry.source_columns.shape, geometry.translation,
                    values, scratch->rows.data(), scratch->edges.data());
  } else {
    if (in_place && geometry.row_order == 0) {
      copy_plane_bytes(scratch->in_plane.data(), in, sizeof(In) * p.in_h * p.in_w);
      in = scratch->in_plane.data();
    }
    gather_plane(in, p.in_w, geometry.row_source.data(), p.out_h, p.out_w, geometry.source_columns,
                 values, in_place ? geometry.row_order : 1,
                 in_place ? scratch->rows.data() : nullptr, geometry.gather_zeros, ahead);
  }
}

// A float32 plane that is its gather alone, its columns a replicate shift
// (SampleGeometry::columns_are_shift), written out of place with streaming
// stores straight from the input: each 16-byte vector of an output row is
// one load from its source row (built from four clamped pixels at the row's
// ends), so that the input's loads and the output's stores interleave.
// Rows of a multiple of 4 pixels, `out` 16-byte aligned; `ahead` is the
// next plane, prefetched over the rows as the gathers do. The vectors inside
// the source row go four at a time, so that a 64-byte line's streaming
// stores leave back to back. Measured (BENCHMARKS.md, "Float32 shifts
// streamed from their input" and "Read-ahead into L2"): built in scratch
// and then streamed, 1.2-1.3x as long at B = 128 and 256; without the
// read-ahead, about a sixth longer; one store per loop turn with the edge
// test between, about 1.45x.
void stream_translated_plane(const float* in, int32_t h, int32_t w, int32_t dx,
                             const int32_t* row_source, float* out, ReadAhead& ahead) {
  // Output vectors x (multiples of 4) in [inner_begin, inner_end) read
  // source pixels x + dx .. x + dx + 3, all inside the row; the others clamp.
  const int32_t inner_begin = std::min(dx < 0 ? (-dx + 3) / 4 * 4 : 0, w);
  const int32_t inner_end =
      std::max(inner_begin, w - 4 - dx >= 0 ? std::min(w, (w - 4 - dx) / 4 * 4 + 4) : 0);
  for (int32_t y = 0; y < h; ++y) {
    ahead.row();
    const float* src = in + static_cast<int64_t>(row_source[y]) * w;
    float* dst = out + static_cast<int64_t>(y) * w;
    const auto clamped = [&](int32_t x) {
      const auto at = [&](int32_t i) { return src[std::min(std::max(x + dx + i, 0), w - 1)]; };
      _mm_stream_ps(dst + x, _mm_setr_ps(at(0), at(1), at(2), at(3)));
    };
    for (int32_t x = 0; x < inner_begin; x += 4) clamped(x);
    // the inner run is a contiguous streaming copy, but inline: a call of
    // stream_bytes per row measured slower (B = 128: 1.87 against 1.52 ms)
    int32_t x = inner_begin;
    for (; x + 16 <= inner_end; x += 16) {
      const __m128 a = _mm_loadu_ps(src + (x + dx));
      const __m128 b = _mm_loadu_ps(src + (x + dx + 4));
      const __m128 c = _mm_loadu_ps(src + (x + dx + 8));
      const __m128 d = _mm_loadu_ps(src + (x + dx + 12));
      _mm_stream_ps(dst + x, a);
      _mm_stream_ps(dst + x + 4, b);
      _mm_stream_ps(dst + x + 8, c);
      _mm_stream_ps(dst + x + 12, d);
    }
    for (; x < inner_end; x += 4) _mm_stream_ps(dst + x, _mm_loadu_ps(src + (x + dx)));
    for (x = inner_end; x < w; x += 4) clamped(x);
  }
}

}  // namespace

// Work unit: one channel plane, or the C planes of a stacked frame when an op
// mixes channels (grayscale, color_jitter). Each plane's rows are gathered
// from the input (in place: in a safe row order, or skipped when the
// geometry is the identity), then the value ops apply in order to whole
// planes (an overlay whose pool pixels line up with the output is one
// contiguous blend), then the planes are converted to the output type if
// needed. Pipelines with a barrier (random_conv, color_jitter's contrast) go
// to the per-frame path.
template <typename In, typename Out>
void augment_cpu(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf) {
  if (has_barrier(p)) {
    augment_cpu_frames(p, buf);
    return;
  }
  const int64_t planes = buf.batch * buf.channels;
  const int64_t out_plane = static_cast<int64_t>(p.out_h) * p.out_w;
  const bool in_place = static_cast<const void*>(buf.in) == static_cast<const void*>(buf.out);
  constexpr bool kSameType = std::is_same<In, Out>::value;
  const bool direct = kSameType && buf.scale == 1.0f && buf.bias == 0.0f;
  // An out-of-place output larger than the cache is written with streaming
  // stores (kernels/streaming_stores.h): each plane is built in scratch, in
  // the L1 cache, then streamed out. The copy-only path and the float32
  // moves stream straight from the input, and a lone thread does that from
  // a smaller output (streams_from_input).
  const int64_t batch_bytes = planes * out_plane * static_cast<int64_t>(sizeof(Out));
  const bool streamed_by_size = !in_place && streams_output(batch_bytes);
  // the threads at::parallel_for runs `units` chunks on
  const auto threads_for = [](int64_t units) {
    return std::max<int64_t>(
        1, std::min<int64_t>(at::in_parallel_region() ? 1 : at::get_num_threads(), units));
  };
  if (p.n_ops == 0 && direct) {
    // Nothing but the layout (a replay buffer's sample without augmentation):
    // each output plane is one copy of the plane it reads, with no per-sample
    // set-up. In place there is nothing to do.
    if (in_place) return;
    constexpr int64_t kCopyAhead = 32;
    const size_t plane_bytes = sizeof(In) * static_cast<size_t>(out_plane);
    // at least 256 KiB per thread: below that a thread costs more than it copies
    const int64_t grain =
        std::max<int64_t>(1, (int64_t{1} << 18) / static_cast<int64_t>(plane_bytes));
    const bool copies_streamed =
        streams_from_input(batch_bytes, threads_for((planes + grain - 1) / grain));
    at::parallel_for(0, planes, grain, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        // a gather's planes lie anywhere in its storage: the first line of
        // the plane kCopyAhead ahead is fetched while this one is copied
        if (plane + kCopyAhead < end) __builtin_prefetch(input_plane(p, buf, plane + kCopyAhead));
        const int64_t sample = plane / buf.channels;
        Out* out = buf.out + output_plane(buf, sample, plane % buf.channels) * out_plane;
        if (copies_streamed) {
          stream_bytes(out, input_plane(p, buf, plane), static_cast<int64_t>(plane_bytes));
        } else {
          copy_plane_bytes(out, input_plane(p, buf, plane), plane_bytes);
        }
      }
      if (copies_streamed) stream_fence();
    });
    return;
  }
  bool any_per_frame = false;
  bool mixes = false;
  for (int k = 0; k < p.n_ops; ++k) {
    any_per_frame |= p.ops[k].kind == OpKind::kOverlay && p.ops[k].per_frame;
    mixes |= p.ops[k].mixes_channels;
  }
  const int64_t group = mixes ? p.frame_channels : 1;  // mixing ops need C == 3
  const int64_t stage_plane = largest_stage_plane(p);
  bool zeros_first = true;  // no value op before a zero-padding op
  // every op only moves pixels with replicated edges (shift with replicate
  // padding, crop, flip, rotate), so that a plane is its gather alone
  bool moves_only = true;
  for (int k = 0, value_ops = 0; k < p.n_ops; ++k) {
    const OpKind kind = p.ops[k].kind;
    const bool zeros = (kind == OpKind::kShift && p.ops[k].zeros) || kind == OpKind::kTranslate;
    const bool value = kind != OpKind::kShift && kind != OpKind::kCrop && kind != OpKind::kFlip &&
                       kind != OpKind::kRotate && kind != OpKind::kTranslate;
    zeros_first = zeros_first && !(zeros && value_ops > 0);
    moves_only = moves_only && !zeros && !value;
    value_ops += value;
  }

  // float32 shifts (and crops, flips, quarter turns) streamed straight from
  // the input, sample by sample where its columns are a shift
  const bool translated_streams =
      std::is_same<In, float>::value && kSameType && direct && !in_place &&
      streams_from_input(batch_bytes, threads_for(planes / group)) && group == 1 && moves_only &&
      p.out_w % 4 == 0 && reinterpret_cast<uintptr_t>(buf.out) % 16 == 0;
  // A call that streams some planes straight from the input streams the
  // others too (built in scratch), so that one fence ends it.
  const bool streamed = streamed_by_size || translated_streams;
  // a converted float32 output streamed as it is converted (stream_span_avx2),
  // unless its floats are not 4-byte aligned (an out= built on a byte buffer
  // at an odd offset): no head of whole floats reaches a 32-byte boundary
  const bool converts_as_streamed = std::is_same<Out, float>::value && streamed && !direct &&
                                    kHasAvx2 &&
                                    reinterpret_cast<uintptr_t>(buf.out) % sizeof(Out) == 0;
  at::parallel_for(0, planes / group, 1, [&](int64_t begin, int64_t end) {
    const int64_t end_plane = end * group;
    GeometryCache& geometries = geometry_cache();
    geometries.start(p, sizeof(In), zeros_first, in_place);
    const SampleGeometry* geometry = nullptr;
    Scratch<In> scratch;
    scratch.pool_row.resize(p.out_w);
    scratch.pool_cells.resize(stage_plane);
    scratch.in_plane.resize(stage_plane);
    scratch.rows.resize(2 * static_cast<size_t>(std::max(p.in_w, p.out_w)));
    scratch.edges.resize(2 * static_cast<size_t>(p.out_h));
    const bool staged = !direct || streamed;  // planes built in scratch.values, then stored
    if (staged) scratch.values.resize(group * out_plane);
    std::vector<Out> streamed_plane(streamed && !direct && !converts_as_streamed ? out_plane : 0);
    if (mixes) scratch.jitter_rows.resize(3 * static_cast<size_t>(p.out_w));
    OpDraw draws[kMaxOps];
    OpDraw next_draws[kMaxOps];  // the next sample's, drawn ahead for ReadAhead
    In* values[kMaxMixedChannels];
    int64_t drawn_sample = -1;
    bool from_input = false;  // this sample's planes go to stream_translated_plane
    int32_t column_shift = 0;
    int64_t drawn_frame = -1;
    bool next_drawn = false;
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t first_plane = unit * group;
      const int64_t sample = first_plane / buf.channels;
      const int64_t channel = first_plane % buf.channels;
      const int64_t frame = channel / p.frame_channels;
      const int32_t first_channel = static_cast<int32_t>(channel % p.frame_channels);
      if (sample != drawn_sample) {
        if (next_drawn && sample == drawn_sample + 1) {
          std::copy(next_draws, next_draws + p.n_ops, draws);
        } else {
          draw_pipeline(p, counter_sample(buf, sample), 0, draws);
        }
        next_drawn = (sample + 1) * buf.channels < end * group;
        if (next_drawn) draw_pipeline(p, counter_sample(buf, sample + 1), 0, next_draws);
        // geometry never depends on the frame
        geometry = &geometries.get(p, draws);
        from_input = translated_streams && geometry->columns_are_shift(p, &column_shift);
        drawn_sample = sample;
        drawn_frame = 0;
      }
      // What the next unit reads, for plane c of this one: the plane `group`
      // ahead and this plane's share of the next sample's distractor images.
      const auto read_ahead = [&](int64_t c) {
        ReadAhead ahead(p.out_h);
        const int64_t next_plane = first_plane + c + group;
        if (next_plane < end * group) {
          ahead.set(ReadAhead::kInput, input_plane(p, buf, next_plane),
                    sizeof(In) * p.in_h * p.in_w);
        }
        for (int k = 0; next_drawn && k < p.n_ops; ++k) {
          const OpDesc& op = p.ops[k];
          if (op.kind != OpKind::kOverlay || op.per_frame) continue;
          const int64_t image = static_cast<int64_t>(p.frame_channels) * op.out_h * op.out_w;
          const int64_t share_begin = image * (channel + c) / buf.channels;
          const int64_t share_end = image * (channel + c + 1) / buf.channels;
          ahead.set(ReadAhead::kPool,
                    buf.pool + pool_offset(p, op, next_draws[k].image, 0, 0, 0) + share_begin,
                    share_end - share_begin);
          break;  // one distractor stream: the first overlay's
        }
        return ahead;
      };
      if (any_per_frame && frame != drawn_frame) {
        draw_pipeline(p, counter_sample(buf, sample), static_cast<uint32_t>(frame), draws);
        drawn_frame = frame;
      }
      // Op k on plane c of the unit, for every op that keeps channels apart.
      const auto plane_op = [&](int k, int64_t c) {
        const OpDesc& op = p.ops[k];
        const OpDraw& d = draws[k];
        if (op.kind == OpKind::kOverlay) {
          const uint32_t weight = static_cast<uint32_t>(d.weight);
          const uint8_t* pool_plane =
              buf.pool + pool_offset(p, op, d.image, first_channel + c, 0, 0);
          if (geometry->op_identity[k]) {
            blend_span(values[c], pool_plane, out_plane, weight);
            return;
          }
          int64_t pool_w = op.out_w;
          if (geometry->op_swapped[k]) {
            transpose_plane(pool_plane, op.out_h, op.out_w, scratch.pool_cells.data());
            pool_plane = scratch.pool_cells.data();
            pool_w = op.out_h;
          }
          for (int32_t y = 0; y < p.out_h; ++y) {
            gather_runs(pool_plane + geometry->rows.at_op[k][y] * pool_w,
                        geometry->op_columns[k].runs, scratch.pool_row.data());
            blend_span(values[c] + static_cast<int64_t>(y) * p.out_w, scratch.pool_row.data(),
                       p.out_w, weight);
          }
        } else if ((op.kind == OpKind::kShift && op.zeros) || op.kind == OpKind::kTranslate) {
          if (geometry->gather_zeros.rows == nullptr)
            blank(*geometry, k, p.out_h, p.out_w, values[c]);
        } else if (op.kind == OpKind::kCutout && d.gate) {
          const uint64_t fill =
              fill_pattern(op.fill_color ? In(d.color[(first_channel + c) % 3]) : In(0));
          for (const Span& rows : geometry->cut_rows[k]) {
            for (int32_t y = rows.first; y < rows.end; ++y) {
              fill_spans(values[c] + static_cast<int64_t>(y) * p.out_w, geometry->cut_spans[k],
                         fill);
            }
          }
        }
      };
      // Each plane goes through gather and ops [next, end) before the next
      // plane starts, so it stays in the L1 cache; only an op that mixes the
      // channels (grayscale, color_jitter, with their gate open) waits for
      // the unit's planes and runs over all of them.
      int next = 0;
      const auto run_planes = [&](int end) {
        for (int64_t c = 0; c < group; ++c) {
          if constexpr (std::is_same<In, float>::value) {
            if (from_input) {
              ReadAhead ahead = read_ahead(c);
              stream_translated_plane(
                  input_plane(p, buf, first_plane + c), p.out_h, p.out_w, column_shift,
                  geometry->row_source.data(),
                  reinterpret_cast<float*>(buf.out +
                                           output_plane(buf, sample, channel + c) * out_plane),
                  ahead);
              continue;
            }
          }
          if (next == 0) {
            values[c] = staged ? scratch.values.data() + c * out_plane
                               : reinterpret_cast<In*>(
                                     buf.out + output_plane(buf, sample, channel + c) * out_plane);
            ReadAhead ahead = read_ahead(c);
            gather_source(p, *geometry, input_plane(p, buf, first_plane + c), in_place, values[c],
                          &scratch, ahead);
          }
          for (int k = next; k < end; ++k) plane_op(k, c);
          if (end == p.n_ops && staged) {
            Out* out = buf.out + output_plane(buf, sample, channel + c) * out_plane;
            const int64_t out_bytes = out_plane * static_cast<int64_t>(sizeof(Out));
            if (!streamed) {
              store_span(values[c], out, out_plane, buf.scale, buf.bias);
            } else {
              // the next plane's input is fetched while this one is written
              const int64_t next_plane = first_plane + c + 1;
              const bool has_next = next_plane < end_plane;
              const void* next_in = has_next ? input_plane(p, buf, next_plane) : nullptr;
              const int64_t next_bytes =
                  has_next ? static_cast<int64_t>(sizeof(In)) * p.in_h * p.in_w : 0;
              bool converted = false;
              if constexpr (std::is_same<Out, float>::value) {
                if (converts_as_streamed) {
                  stream_span_avx2(values[c], out, out_plane, buf.scale, buf.bias, next_in,
                                   next_bytes);
                  converted = true;
                }
              }
              if (!converted) {
                const void* plane = values[c];
                if (!direct) {
                  store_span(values[c], streamed_plane.data(), out_plane, buf.scale, buf.bias);
                  plane = streamed_plane.data();
                }
                stream_bytes(out, plane, out_bytes, next_in, next_bytes);
              }
            }
          }
        }
      };
      for (int k = 0; k < p.n_ops; ++k) {
        const OpDesc& op = p.ops[k];
        const OpDraw& d = draws[k];
        if (!op.mixes_channels || !d.gate) continue;
        run_planes(k);
        if (op.kind == OpKind::kGrayscale) {
          gray_planes(values[0], values[1], values[2], out_plane);
        } else {  // color_jitter without contrast (no barrier)
          const FrameView<In> frame{values[0], out_plane, p.out_h, p.out_w};
          jitter_frame_rows(frame, op, jitter_factors(op, d, 0.0f), scratch.jitter_rows.data(),
                            values[0], out_plane);
        }
        next = k + 1;
      }
      run_planes(p.n_ops);
    }
    if (streamed) stream_fence();
  });
}

const char* cpu_loops_name(CpuLoops loops) {
  switch (loops) {
    case CpuLoops::kBaseline:
      return "baseline";
    case CpuLoops::kAvx2:
      return "avx2";
    case CpuLoops::kAvx512:
      return "avx512";
  }
  return "?";
}

// AVX-512 needs its F and BW parts (byte lanes), which GCC reports only where
// the OS saves the 512-bit registers.
CpuLoops widest_cpu_loops() {
  __builtin_cpu_init();  // this may run from a static initialiser, before libgcc's own
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    return CpuLoops::kAvx512;
  return __builtin_cpu_supports("avx2") ? CpuLoops::kAvx2 : CpuLoops::kBaseline;
}

std::string cpu_loops_setting_problem() {
  if (!kLoopsSetting.unknown) return "";
  return std::string("the environment variable OBSAUG_CPU_LOOPS is '") + kLoopsSetting.text +
         "'; set it to baseline, avx2 or avx512 (the widest loops the CPU ops may use, where "
         "the CPU has them) or leave it unset (the widest the CPU has), then restart the "
         "process";
}

CpuLoops cpu_loops() { return kLoops; }

void blend_bytes(uint8_t* v, const uint8_t* d, int64_t n, uint32_t weight, CpuLoops loops) {
  TORCH_CHECK(loops <= widest_cpu_loops(), "blend_bytes: this CPU has no ", cpu_loops_name(loops),
              " loops");
  blend_bytes_with(loops, v, d, n, weight);
}

void gray_bytes(uint8_t* r, uint8_t* g, uint8_t* b, int64_t n) { gray_planes(r, g, b, n); }

template void augment_cpu<uint8_t, uint8_t>(const PipelineDesc&,
                                            const AugmentBuffers<uint8_t, uint8_t>&);
template void augment_cpu<uint8_t, float>(const PipelineDesc&,
                                          const AugmentBuffers<uint8_t, float>&);
template void augment_cpu<float, float>(const PipelineDesc&, const AugmentBuffers<float, float>&);

}  // namespace obsaug
