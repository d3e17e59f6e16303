#include "kernels/context.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/isa_kernels.h"

namespace moeserve::kernels {

void* ScratchBuffer::Get(size_t bytes) {
  if (bytes > size_) {
    std::free(data_);
    size_ = std::max<size_t>((bytes + 63) / 64 * 64, 64);
    data_ = std::aligned_alloc(64, size_);
    MOESERVE_CHECK(data_ != nullptr, "out of memory for ", size_, " bytes of scratch");
  }
  return data_;
}

KernelContext::KernelContext(ThreadPool& pool, Isa isa)
    : pool_(&pool),
      isa_(isa),
      kernels_(&KernelsFor(isa)),
      workers_(std::make_unique<WorkerScratch[]>(pool.num_threads())),
      call_(std::make_unique<CallScratch>()) {
  // An Error, not a check: the ISA can come from a caller's choice (a test, a bench flag).
  if (isa > MachineIsa())
    Fail("the kernels cannot run ", IsaName(isa), " here (", IsaName(MachineIsa()),
         " is the best this machine and build support)");
}

KernelContext::~KernelContext() = default;

size_t KernelContext::scratch_bytes() const {
  size_t total = call_->bytes();
  for (size_t t = 0; t < pool_->num_threads(); ++t) total += workers_[t].bytes();
  return total;
}

}  // namespace moeserve::kernels
