// CUDA launchers of the prioritized sampler (replay/proportional.h): the same
// tree arithmetic as the host loops (replay/proportional_tree.h), one thread
// per touched leaf or per draw, on the caller's stream.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "replay/proportional.h"

namespace obsaug {
namespace {

constexpr int kThreads = 256;
// Updates of up to kOneBlockCount leaves run in one block (one launch); larger
// ones (a rebuild on load) launch once per level over the whole grid.
constexpr int kOneBlockThreads = 1024;
constexpr int64_t kOneBlockCount = 8192;

int blocks_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);  // grid-stride beyond
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("obsaug replay: ") + what +
                             " failed on CUDA: " + cudaGetErrorString(err));
  }
}

__global__ void set_leaves(tree::TreeView t, const int64_t* slots, const double* weights,
                           int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    tree::set_leaf(t, slots[i], weights[i]);
  }
}

// The kept ancestors `height` levels above the given leaves; neighbours
// sharing one write the same value.
__global__ void refresh_level(tree::TreeView t, const int64_t* slots, int64_t count, int height) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    tree::refresh_ancestor(t, t.leaves + slots[i], height);
  }
}

// A small update (a sample's priorities, a frame written) in one launch: one
// block walks the kept levels, a barrier between them.
__global__ void __launch_bounds__(kOneBlockThreads)
    assign_in_one_block(tree::TreeView t, const int64_t* slots, const double* weights,
                        int64_t count) {
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    tree::set_leaf(t, slots[i], weights[i]);
  }
  const int depth = tree::depth_of(t.leaves);
  for (int h = tree::next_kept_height(0, depth); h <= depth; h = tree::next_kept_height(h, depth)) {
    __syncthreads();  // the kept level below is written (global writes seen by the block)
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      tree::refresh_ancestor(t, t.leaves + slots[i], h);
    }
  }
}

__global__ void draw(tree::TreeView t, uint64_t seed, uint64_t call, int64_t batch, int64_t* slots,
                     double* leaf_weights) {
  const double total = tree::sum_at(t, 1);
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < batch;
       b += int64_t{gridDim.x} * blockDim.x) {
    const double target =
        tree::stratified_target(seed, call, static_cast<uint32_t>(b), batch, total);
    const int64_t slot = tree::descend(tree::sums(t), t.leaves, target);
    slots[b] = slot;
    leaf_weights[b] = tree::sum_at(t, t.leaves + slot);
    if (b == 0) {
      leaf_weights[batch] = tree::min_at(t, 1);
      leaf_weights[batch + 1] = total;
    }
  }
}

}  // namespace

void proportional_assign_cuda(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  if (count <= kOneBlockCount) {
    assign_in_one_block<<<1, kOneBlockThreads, 0, stream>>>(tree, slots, weights, count);
    check_launch("updating the priority tree");
    return;
  }
  set_leaves<<<blocks_for(count), kThreads, 0, stream>>>(tree, slots, weights, count);
  check_launch("setting priority tree leaves");
  const int depth = tree::depth_of(tree.leaves);
  for (int h = tree::next_kept_height(0, depth); h <= depth; h = tree::next_kept_height(h, depth)) {
    refresh_level<<<blocks_for(count), kThreads, 0, stream>>>(tree, slots, count, h);
    check_launch("updating the priority tree");
  }
}

void proportional_draw_cuda(tree::TreeView tree, uint64_t seed, uint64_t call, int64_t batch,
                            int64_t* slots, double* leaf_weights, cudaStream_t stream) {
  if (batch <= 0) return;  // no draws (and a grid of 0 blocks is not a valid launch)
  draw<<<blocks_for(batch), kThreads, 0, stream>>>(tree, seed, call, batch, slots, leaf_weights);
  check_launch("prioritized sampling");
}

}  // namespace obsaug
