// The kernels' scratch memory: growable buffers owned by a KernelContext (context.h), one set per
// pool thread and one for the calling thread, instead of thread_local buffers that stay with
// whichever thread last ran the largest call.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace moeserve::kernels {

// A growable 64-byte-aligned buffer; reused across calls so hot paths do not allocate.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(data_); }
  // At least `bytes` bytes; previous contents are not kept.
  void* Get(size_t bytes);
  template <typename T>
  T* As(size_t count) {
    return static_cast<T*>(Get(count * sizeof(T)));
  }
  size_t capacity() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// What one pool thread's share of a kernel call uses. During a call only that thread touches it.
struct WorkerScratch {
  ScratchBuffer pack;        // a GEMM's packed weight panel (isa_kernels.cc)
  ScratchBuffer panel;       // decoded weight rows, or a row group's partial result
  ScratchBuffer xpack;       // x packed by this thread when the call did not pack it
  ScratchBuffer fp8_scales;  // the FP8-block GEMM's per-panel scales
  ScratchBuffer x_row;       // one bf16-rounded x row while packing x (matmul.cc)
  ScratchBuffer attention;   // an attention tile's K, V, scores and accumulators (attention.cc)
  ScratchBuffer attention_tiles;  // the AMX attention tile's operand tiles (attention_amx.cc)
  ScratchBuffer moe_gate_up;  // MoeExperts' fused run: one expert's gate and up columns (moe.cc)
  ScratchBuffer moe_down;     // MoeExperts: one expert's down projection columns (moe.cc)

  size_t bytes() const {
    return pack.capacity() + panel.capacity() + xpack.capacity() + fp8_scales.capacity() +
           x_row.capacity() + attention.capacity() + attention_tiles.capacity() +
           moe_gate_up.capacity() + moe_down.capacity();
  }
};

// What lives through one call, owned by the calling thread: prepared inputs and intermediate
// matrices that every thread reads.
struct CallScratch {
  ScratchBuffer x;          // MatMul's prepared x
  ScratchBuffer moe_index;  // MoeExperts' routing tables
  ScratchBuffer moe_x, moe_gate_up, moe_act, moe_act_x;
  ScratchBuffer attention_items;     // Attention's work items
  ScratchBuffer attention_splits;    // its split-KV plans (attention.cc)
  ScratchBuffer attention_partials;  // split items' partial outputs, row maxima and sums

  size_t bytes() const {
    return x.capacity() + moe_index.capacity() + moe_x.capacity() + moe_gate_up.capacity() +
           moe_act.capacity() + moe_act_x.capacity() + attention_items.capacity() +
           attention_splits.capacity() + attention_partials.capacity();
  }
};

}  // namespace moeserve::kernels
