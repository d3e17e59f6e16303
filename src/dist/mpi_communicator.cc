#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <vector>

#include "core/check.h"

namespace moeserve::dist {
namespace {

class Timer {
 public:
  explicit Timer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// MPI counts are ints: large payloads go in slices.
constexpr size_t kMaxCount = INT_MAX / 2;

}  // namespace

bool MpiCommunicator::LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

MpiCommunicator::MpiCommunicator() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED)
    Fail("the MPI library does not support MPI_THREAD_SERIALIZED (got level ", provided, ")");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Finalize();
}

void MpiCommunicator::AllReduceSum(float* data, size_t count) {
  Timer t(seconds_);
  for (size_t off = 0; off < count; off += kMaxCount)
    MPI_Allreduce(MPI_IN_PLACE, data + off, static_cast<int>(std::min(kMaxCount, count - off)),
                  MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void MpiCommunicator::AllReduceSum(bf16* data, size_t count) {
  // Summed in f32 (a bf16 running sum would lose bits at every rank) and rounded once.
  std::vector<float> wide(count);
  for (size_t i = 0; i < count; ++i) wide[i] = Bf16ToF32(data[i]);
  AllReduceSum(wide.data(), count);
  for (size_t i = 0; i < count; ++i) data[i] = F32ToBf16(wide[i]);
}

void MpiCommunicator::AllGather(const void* send, void* recv, size_t bytes_per_rank) {
  Timer t(seconds_);
  MOESERVE_CHECK(bytes_per_rank <= kMaxCount, bytes_per_rank);
  MPI_Allgather(send, static_cast<int>(bytes_per_rank), MPI_BYTE, recv,
                static_cast<int>(bytes_per_rank), MPI_BYTE, MPI_COMM_WORLD);
}

void MpiCommunicator::Broadcast(void* data, size_t bytes, int root) {
  Timer t(seconds_);
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += kMaxCount)
    MPI_Bcast(p + off, static_cast<int>(std::min(kMaxCount, bytes - off)), MPI_BYTE, root,
              MPI_COMM_WORLD);
}

void MpiCommunicator::Barrier() {
  Timer t(seconds_);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace moeserve::dist
