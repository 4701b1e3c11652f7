// CPU backend of the fused pipeline.
//
// Work unit: one channel plane. The geometric part of the pipeline is
// separable, so for each sample the row and column maps of every stage are
// traced once and the column maps compressed into runs (a contiguous copy, or
// one pixel repeated); each row is gathered with a few vector moves, and each
// overlay is a contiguous blend the compiler vectorizes. All arithmetic comes
// from kernels/pipeline.h.
#include "kernels/augment_cpu.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

// Hot loops are compiled for AVX2 and for the baseline, picked at load time
// through an ifunc. Under ThreadSanitizer the resolvers would run before the
// sanitizer initialises, so that build keeps the baseline only; clang (the
// fuzzing build) does not multiversion templates.
#if defined(__SANITIZE_THREAD__) || defined(__clang__)
#define OBSAUG_CLONES
#else
#define OBSAUG_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace obsaug {
namespace {

// dst[dst_x + i] = src[src_x + i] (copy) or src[src_x] (repeat), i < len.
struct Run {
  int32_t dst_x;
  int32_t len;
  int32_t src_x;
  bool copy;
};

void runs_of(const std::vector<int32_t>& coords, std::vector<Run>* runs) {
  runs->clear();
  const int32_t n = static_cast<int32_t>(coords.size());
  int32_t x = 0;
  while (x < n) {
    Run run{x, 1, coords[x], true};
    if (x + 1 < n && coords[x + 1] == coords[x]) {
      run.copy = false;
      while (x + run.len < n && coords[x + run.len] == run.src_x) ++run.len;
    } else {
      while (x + run.len < n && coords[x + run.len] == run.src_x + run.len) ++run.len;
    }
    if (run.len == 1) run.copy = false;  // the same thing; keeps [repeat][copy][repeat] simple
    runs->push_back(run);
    x += run.len;
  }
}

// Copies n bytes with fixed-size moves the compiler turns into vector loads
// and stores (the last chunk overlaps), avoiding a memcpy call per short row.
inline void copy_bytes(unsigned char* __restrict dst, const unsigned char* __restrict src,
                       int64_t n) {
  if (n >= 32) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) __builtin_memcpy(dst + i, src + i, 32);
    if (i < n) __builtin_memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    __builtin_memcpy(dst, src, 16);
    __builtin_memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    __builtin_memcpy(dst, src, 8);
    __builtin_memcpy(dst + n - 8, src + n - 8, 8);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// The common column shape [repeat][copy][repeat] (any chain of shifts and
// crops), as plain values so the row loop keeps them in registers.
struct SimpleColumns {
  int32_t left_len = 0, left_src = 0;
  int32_t mid_dst = 0, mid_len = 0, mid_src = 0;
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
    if (i < runs.size() && !runs[i].copy) {
      shape.left_len = runs[i].len;
      shape.left_src = runs[i].src_x;
      ++i;
    }
    if (i >= runs.size() || !runs[i].copy) return;
    shape.mid_dst = runs[i].dst_x;
    shape.mid_len = runs[i].len;
    shape.mid_src = runs[i].src_x;
    ++i;
    if (i < runs.size() && !runs[i].copy) {
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

// Sets dst[0, len) (at_end: dst[n - len, n)) to `value` inside a row of n
// elements, with one 8-byte read-modify-write when the fill is at most 8
// bytes and the row at least 8 bytes: edge fills of a shift are a few pixels,
// and a loop or memset call per row costs more than the pixels themselves.
template <typename T>
inline void fill_edge(T* row, int32_t n, int32_t len, T value, bool at_end) {
  constexpr int64_t kWord = 8;
  const int64_t fill_bytes = len * static_cast<int64_t>(sizeof(T));
  if (fill_bytes > kWord || n * static_cast<int64_t>(sizeof(T)) < kWord) {
    T* d = at_end ? row + n - len : row;
    for (int32_t i = 0; i < len; ++i) d[i] = value;
    return;
  }
  T pattern[kWord / sizeof(T)];
  for (auto& v : pattern) v = value;
  uint64_t fill_word, old_word;
  __builtin_memcpy(&fill_word, pattern, kWord);
  unsigned char* window =
      reinterpret_cast<unsigned char*>(at_end ? row + n : row) - (at_end ? kWord : 0);
  __builtin_memcpy(&old_word, window, kWord);
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "fill_edge assumes little endian");
  const uint64_t mask = fill_bytes == kWord ? ~0ull
                        : at_end ? ~(~0ull >> (8 * fill_bytes))  // the window's last bytes
                                 : (1ull << (8 * fill_bytes)) - 1;
  const uint64_t word = (old_word & ~mask) | (fill_word & mask);
  __builtin_memcpy(window, &word, kWord);
}

template <typename T>
inline void gather_runs(const T* __restrict src, const std::vector<Run>& runs, T* __restrict dst) {
  for (const Run& run : runs) {
    T* d = dst + run.dst_x;
    if (run.copy) {
      copy_bytes(reinterpret_cast<unsigned char*>(d),
                 reinterpret_cast<const unsigned char*>(src + run.src_x),
                 static_cast<int64_t>(sizeof(T)) * run.len);
    } else {
      const T value = src[run.src_x];
      for (int32_t i = 0; i < run.len; ++i) d[i] = value;
    }
  }
}

// A plane whose rows are a clamped vertical translation of the input with the
// same row stride: output rows [first, end) read input rows y + dy, rows above
// read row `top`, rows below read row `bottom`. The translated rows are then
// one contiguous block of the flat plane (offset dy * width + dx), moved with
// one memmove; only their edge pixels need fixing afterwards.
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

// The translation path (see RowTranslation); `in` may equal `values`.
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
    std::memmove(values + begin, in + static_cast<int64_t>(t.first + t.dy) * width + c.mid_src,
                 sizeof(T) * count);
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

// Gathers every output row of one plane: row y of `values` takes input row
// row_source[y] through `plan`. In place (row_scratch given), rows are written
// in `row_order` and a row that reads itself is copied to row_scratch first.
template <typename T>
OBSAUG_CLONES void gather_plane(const T* in, int64_t in_w, const int32_t* row_source, int32_t out_h,
                                int32_t out_w, const ColumnPlan& plan, T* values, int row_order,
                                T* row_scratch) {
  const bool simple = plan.simple;
  const SimpleColumns c = plan.shape;
  const bool blocks = simple && fills_as_blocks<T>(c, out_w);
  const int64_t mid_bytes = static_cast<int64_t>(sizeof(T)) * c.mid_len;
  for (int32_t i = 0; i < out_h; ++i) {
    const int32_t y = row_order < 0 ? out_h - 1 - i : i;
    const T* src = in + row_source[y] * in_w;
    T* dst = values + static_cast<int64_t>(y) * out_w;
    if (row_scratch != nullptr && src == dst) {
      std::memcpy(row_scratch, src, sizeof(T) * in_w);
      src = row_scratch;
    }
    if (!simple) {
      gather_runs(src, plan.runs, dst);
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
    copy_bytes(reinterpret_cast<unsigned char*>(dst + c.mid_dst),
               reinterpret_cast<const unsigned char*>(src + c.mid_src), mid_bytes);
  }
}

template <typename T>
OBSAUG_CLONES void blend_span(T* __restrict v, const uint8_t* __restrict d, int64_t n,
                              uint32_t weight) {
  for (int64_t x = 0; x < n; ++x) v[x] = blend(v[x], d[x], weight);
}

// uint8 blend with AVX2, an exact rewrite of blend() in pipeline.h:
//   (x*(256-w) + d*w + 128) >> 8 == x + floor(((d-x)*w + 128) / 256)
//                                == x + mulhrs(d - x, w << 7)   for w <= 255,
// because mulhrs(a, b) = (a*b + 2^14) >> 15 with a 32-bit product. w == 256
// is the distractor itself. tests/kernels/test_augment.cpp checks every
// (x, d, w) against blend().
__attribute__((target("avx2"))) void blend_bytes_avx2(uint8_t* __restrict v,
                                                      const uint8_t* __restrict d, int64_t n,
                                                      uint32_t weight) {
  if (weight == kWeightOne) {
    std::memcpy(v, d, static_cast<size_t>(n));
    return;
  }
  const __m256i w = _mm256_set1_epi16(static_cast<int16_t>(weight << 7));
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x_lo =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    const __m256i x_hi =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i + 16)));
    const __m256i d_lo =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i)));
    const __m256i d_hi =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i + 16)));
    const __m256i r_lo =
        _mm256_add_epi16(x_lo, _mm256_mulhrs_epi16(_mm256_sub_epi16(d_lo, x_lo), w));
    const __m256i r_hi =
        _mm256_add_epi16(x_hi, _mm256_mulhrs_epi16(_mm256_sub_epi16(d_hi, x_hi), w));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(r_lo, r_hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), packed);
  }
  for (; i < n; ++i) v[i] = blend(v[i], d[i], weight);
}

const bool kHasAvx2 = [] {
  __builtin_cpu_init();  // this initialiser may run before libgcc's own
  return __builtin_cpu_supports("avx2") != 0;
}();

template <>
void blend_span<uint8_t>(uint8_t* __restrict v, const uint8_t* __restrict d, int64_t n,
                         uint32_t weight) {
  if (kHasAvx2) {
    blend_bytes_avx2(v, d, n, weight);
    return;
  }
  for (int64_t x = 0; x < n; ++x) v[x] = blend(v[x], d[x], weight);
}

template <typename T>
void zero_row(T* __restrict v, const int8_t* __restrict col_zero, int32_t row_zero, int32_t op,
              int32_t n) {
  for (int32_t x = 0; x < n; ++x) {
    const int32_t zero_op = std::max<int32_t>(row_zero, col_zero[x]);
    v[x] = zero_op == op ? T(0) : v[x];
  }
}

template <typename In, typename Out>
OBSAUG_CLONES void store_span(const In* __restrict v, Out* __restrict out, int64_t n, float scale,
                              float bias) {
  for (int64_t x = 0; x < n; ++x) out[x] = to_output(v[x], scale, bias, static_cast<Out*>(nullptr));
}

// Everything about one sample's geometry that every plane and row reuses.
struct SampleGeometry {
  std::vector<AxisTrace> rows;         // [out_h]
  std::vector<int32_t> row_source;     // [out_h] rows[y].source
  std::vector<int8_t> col_zero;        // [out_w] AxisTrace::zero_op of each column
  ColumnPlan source_columns;           // columns of the pipeline's input
  std::vector<ColumnPlan> op_columns;  // [n_ops] pool columns each overlay reads
  std::vector<bool> op_identity;       // overlay reads pool pixel (y, x) for output (y, x)
  bool source_identity = false;        // output pixel (y, x) reads input pixel (y, x)
  // In place, rows must be written in an order that never overwrites a row
  // another output row still reads: +1 top-down (every row reads itself or
  // a row below), -1 bottom-up, 0 neither (then the plane is copied first).
  int row_order = 0;
  RowTranslation translation;  // valid when the translation path applies

  void build(const PipelineDesc& p, const OpDraw* draws) {
    rows.resize(p.out_h);
    row_source.resize(p.out_h);
    for (int32_t y = 0; y < p.out_h; ++y) {
      rows[y] = trace_axis(p, draws, 0, y);
      row_source[y] = rows[y].source;
    }
    cols.resize(p.out_w);
    col_zero.resize(p.out_w);
    coords.resize(p.out_w);
    for (int32_t x = 0; x < p.out_w; ++x) {
      cols[x] = trace_axis(p, draws, 1, x);
      col_zero[x] = static_cast<int8_t>(cols[x].zero_op);
      coords[x] = cols[x].source;
    }
    source_columns.assign(coords);
    const std::vector<Run>& source_runs = source_columns.runs;
    bool reads_below = true;
    bool reads_above = true;
    source_identity = p.out_h == p.in_h && p.out_w == p.in_w && source_runs.size() == 1 &&
                      source_runs[0].copy && source_runs[0].src_x == 0;
    for (int32_t y = 0; y < p.out_h; ++y) {
      reads_below = reads_below && rows[y].source >= y;
      reads_above = reads_above && rows[y].source <= y;
      source_identity = source_identity && rows[y].source == y;
    }
    row_order = reads_below ? 1 : (reads_above ? -1 : 0);
    translation = RowTranslation();
    if (p.in_h == p.out_h && p.in_w == p.out_w && source_columns.simple) {
      translation = find_translation(row_source, p.in_h);
    }
    op_columns.resize(p.n_ops);
    op_identity.assign(p.n_ops, false);
    for (int k = 0; k < p.n_ops; ++k) {
      if (p.ops[k].kind != OpKind::kOverlay) continue;
      bool identity = p.ops[k].out_h == p.out_h && p.ops[k].out_w == p.out_w;
      for (int32_t x = 0; x < p.out_w; ++x) {
        coords[x] = cols[x].at_op[k];
        identity = identity && coords[x] == x;
      }
      for (int32_t y = 0; y < p.out_h && identity; ++y) identity = rows[y].at_op[k] == y;
      op_identity[k] = identity;
      if (!identity) op_columns[k].assign(coords);
    }
  }

 private:
  std::vector<AxisTrace> cols;  // build() scratch, kept to reuse its storage
  std::vector<int32_t> coords;
};

// Per-thread scratch: a pool row, the input plane (in place) and the value
// plane (when the output is not written directly).
template <typename In>
struct Scratch {
  std::vector<uint8_t> pool_row;
  std::vector<In> rows;   // two rows
  std::vector<In> edges;  // two values per row
  std::vector<In> in_plane;
  std::vector<In> values;
};

}  // namespace

template <typename In, typename Out>
void augment_cpu(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf) {
  if (p.n_segments > 0) {
    augment_cpu_frames(p, buf);
    return;
  }
  const int64_t planes = buf.batch * buf.channels;
  const int64_t in_plane = static_cast<int64_t>(p.in_h) * p.in_w;
  const int64_t out_plane = static_cast<int64_t>(p.out_h) * p.out_w;
  const bool in_place = static_cast<const void*>(buf.in) == static_cast<const void*>(buf.out);
  constexpr bool kSameType = std::is_same<In, Out>::value;
  const bool direct = kSameType && buf.scale == 1.0f && buf.bias == 0.0f;
  bool any_per_frame = false;
  for (int k = 0; k < p.n_ops; ++k)
    any_per_frame |= p.ops[k].kind == OpKind::kOverlay && p.ops[k].per_frame;

  // Each plane: gather every row from the input (in place: in a safe row
  // order, or skipped when the geometry is the identity), then apply the ops in order
  // to the whole plane (an overlay whose pool pixels line up with the output
  // is one contiguous blend), then convert to the output type if needed.
  at::parallel_for(0, planes, 1, [&](int64_t begin, int64_t end) {
    SampleGeometry geometry;
    Scratch<In> scratch;
    scratch.pool_row.resize(p.out_w);
    if (in_place) scratch.in_plane.resize(in_plane);
    scratch.rows.resize(2 * static_cast<size_t>(std::max(p.in_w, p.out_w)));
    scratch.edges.resize(2 * static_cast<size_t>(p.out_h));
    if (!direct) scratch.values.resize(out_plane);
    OpDraw draws[kMaxOps];
    int64_t drawn_sample = -1;
    int64_t drawn_frame = -1;
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t sample = plane / buf.channels;
      const int64_t channel = plane % buf.channels;
      const int64_t frame = channel / p.frame_channels;
      const int32_t channel_in_frame = static_cast<int32_t>(channel % p.frame_channels);
      if (sample != drawn_sample) {
        draw_pipeline(p, counter_sample(buf, sample), 0, draws);
        geometry.build(p, draws);  // geometry never depends on the frame
        drawn_sample = sample;
        drawn_frame = 0;
      }
      if (any_per_frame && frame != drawn_frame) {
        draw_pipeline(p, counter_sample(buf, sample), static_cast<uint32_t>(frame), draws);
        drawn_frame = frame;
      }
      const In* in = input_plane(p, buf, plane);
      Out* out = buf.out + plane * out_plane;
      In* values = direct ? reinterpret_cast<In*>(out) : scratch.values.data();
      if (in_place && geometry.source_identity) {
        // nothing to move
      } else if (geometry.translation.valid) {
        translate_plane(in, p.out_h, p.out_w, geometry.source_columns.shape, geometry.translation,
                        values, scratch.rows.data(), scratch.edges.data());
      } else {
        if (in_place && geometry.row_order == 0) {
          std::memcpy(scratch.in_plane.data(), in, sizeof(In) * in_plane);
          in = scratch.in_plane.data();
        }
        gather_plane(in, p.in_w, geometry.row_source.data(), p.out_h, p.out_w,
                     geometry.source_columns, values, in_place ? geometry.row_order : 1,
                     in_place ? scratch.rows.data() : nullptr);
      }
      for (int k = 0; k < p.n_ops; ++k) {
        const OpDesc& op = p.ops[k];
        if (op.kind == OpKind::kOverlay) {
          const uint32_t weight = static_cast<uint32_t>(draws[k].weight);
          const uint8_t* pool_plane =
              buf.pool + pool_offset(p, op, draws[k].image, channel_in_frame, 0, 0);
          if (geometry.op_identity[k]) {
            blend_span(values, pool_plane, out_plane, weight);
            continue;
          }
          for (int32_t y = 0; y < p.out_h; ++y) {
            gather_runs(pool_plane + static_cast<int64_t>(geometry.rows[y].at_op[k]) * op.out_w,
                        geometry.op_columns[k].runs, scratch.pool_row.data());
            blend_span(values + static_cast<int64_t>(y) * p.out_w, scratch.pool_row.data(), p.out_w,
                       weight);
          }
        } else if (op.kind == OpKind::kShift && op.zeros) {
          for (int32_t y = 0; y < p.out_h; ++y) {
            zero_row(values + static_cast<int64_t>(y) * p.out_w, geometry.col_zero.data(),
                     geometry.rows[y].zero_op, k, p.out_w);
          }
        }
      }
      if (!direct) store_span(values, out, out_plane, buf.scale, buf.bias);
    }
  });
}

void blend_bytes(uint8_t* v, const uint8_t* d, int64_t n, uint32_t weight) {
  blend_span(v, d, n, weight);
}

template void augment_cpu<uint8_t, uint8_t>(const PipelineDesc&,
                                            const AugmentBuffers<uint8_t, uint8_t>&);
template void augment_cpu<uint8_t, float>(const PipelineDesc&,
                                          const AugmentBuffers<uint8_t, float>&);
template void augment_cpu<float, float>(const PipelineDesc&, const AugmentBuffers<float, float>&);

}  // namespace obsaug
