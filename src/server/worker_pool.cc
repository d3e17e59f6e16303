#include "server/worker_pool.h"

#include <algorithm>
#include <system_error>
#include <thread>

namespace moeserve::server {

struct WorkerPool::Worker {
  std::condition_variable cv;
  std::function<void()> job;  // handed over by Post while the worker is idle
};

WorkerPool::WorkerPool(size_t max_threads, size_t min_threads, std::chrono::milliseconds idle_exit,
                       std::function<void()> on_idle)
    : max_threads_(std::max<size_t>(max_threads, 1)),
      min_threads_(std::min(min_threads, std::max<size_t>(max_threads, 1))),
      idle_exit_(idle_exit),
      on_idle_(std::move(on_idle)) {}

WorkerPool::~WorkerPool() {
  Join();
}

void WorkerPool::Post(std::function<void()> job) {
  std::unique_lock lock(mu_);
  if (stopping_) return;
  if (!idle_.empty()) {
    Worker* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(job);
    w->cv.notify_one();
    return;
  }
  queue_.push_back(std::move(job));
  if (threads_ < max_threads_) {
    ++threads_;
    ++started_;
    try {
      // Detached: a thread's last touch of the pool is under mu_, before all_exited_ is notified.
      std::thread([this] {
        Worker self;
        Loop(&self);
      }).detach();
    } catch (const std::system_error&) {
      // Out of threads (ulimit): the job waits for a running thread; with none, the caller learns.
      --threads_;
      --started_;
      if (threads_ == 0) {
        queue_.pop_back();
        throw;
      }
    }
  }
}

void WorkerPool::Loop(Worker* self) {
  std::unique_lock lock(mu_);
  for (;;) {
    std::function<void()> job;
    if (!queue_.empty()) {
      job = std::move(queue_.front());
      queue_.pop_front();
    } else {
      bool exit = false;
      while (!self->job && !exit) {
        if (stopping_) {
          exit = true;
          break;
        }
        idle_.push_back(self);
        const bool woken =
            self->cv.wait_for(lock, idle_exit_, [&] { return self->job || stopping_; });
        if (self->job) break;  // Post took it off idle_
        idle_.erase(std::find(idle_.begin(), idle_.end(), self));
        if (!woken && threads_ > min_threads_) exit = true;
      }
      if (exit) {
        --threads_;
        all_exited_.notify_all();
        return;
      }
      job = std::move(self->job);
      self->job = nullptr;
    }
    lock.unlock();
    job();
    job = nullptr;  // the job's captures are destroyed on this thread, outside the lock
    lock.lock();
    if (on_idle_ && queue_.empty()) {
      // A job posted meanwhile waits in queue_ (this thread is not in idle_), taken next.
      lock.unlock();
      on_idle_();
      lock.lock();
    }
  }
}

void WorkerPool::Join() {
  std::unique_lock lock(mu_);
  // Queued jobs still run: a busy thread takes them before it looks at stopping_ (a job is only
  // queued while every one of max_threads_ threads is busy).
  stopping_ = true;
  for (Worker* w : idle_) w->cv.notify_one();
  all_exited_.wait(lock, [&] { return threads_ == 0; });
}

size_t WorkerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

size_t WorkerPool::idle_threads() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

size_t WorkerPool::threads_started() const {
  std::lock_guard lock(mu_);
  return started_;
}

}  // namespace moeserve::server
