// Lab 07 exercise: the prefetching loader (declared and specified in exercise.h).
// Write each TODO(lab07) below, then check your work with ./lab check 07.
#include "exercise.h"

#include <utility>

#include "common/errors.h"

namespace lab07 {

// Why: the worker thread must exist before the loop asks for its first batch, so that batch 0 is being
// made while the model and the optimizer are still being set up.
// Hints:
// - keep make_batch and capacity in the members; reject a capacity below 1 and an empty make_batch with
//   speedlabs::UsageError *before* starting any thread (a constructor that throws runs no destructor);
// - start the thread last: worker_ = std::thread([this] { work(); });
PrefetchLoader::PrefetchLoader(MakeBatch make_batch, int64_t capacity)
    : make_batch_(std::move(make_batch)), capacity_(capacity) {
  // TODO(lab07): check the arguments, then start the worker thread.
  speedlabs::not_implemented("07", "07_profile", "PrefetchLoader::PrefetchLoader");
}

// Given: stopping is stop()'s job; a std::thread still joinable when destroyed ends the program.
PrefetchLoader::~PrefetchLoader() { stop(); }

// Why: this loop is the whole point. make_batch is the slow part (tokenizing, decoding, copying); call it
// *without* holding the mutex, so that the training loop can take batches out of the queue meanwhile.
// Hints:
// - for index = 0, 1, 2, ...: stop at once when stop_requested_; make the batch; then under the lock
//   wait on changed_ until there is room (queue_.size() < capacity_) or stop is requested;
// - nullopt from make_batch ends the stream: set finished_ and notify, so a waiting next() wakes up;
// - catch (...) around make_batch: keep std::current_exception() in error_, set finished_, notify,
//   return. An exception that leaves a thread's function calls std::terminate;
// - notify_all() after every change a waiting thread might be waiting for (a batch in, finished_).
void PrefetchLoader::work() {
  // TODO(lab07): the worker's loop.
  speedlabs::not_implemented("07", "07_profile", "PrefetchLoader::work");
}

// Why: the loop must get every batch in order, wait only when the worker is behind, and hear about a
// failure of the worker instead of waiting for a batch that will never come.
// Hints:
// - under the lock, wait on changed_ until the queue is not empty or finished_;
// - a queued batch first (even after the worker failed: those batches were made fine); take it from the
//   front, notify (there is room now) and return it;
// - an empty queue and finished_: rethrow error_ if there is one (std::rethrow_exception), else nullopt.
std::optional<datasets::Batch> PrefetchLoader::next() {
  // TODO(lab07): wait for a batch, the end of the stream or the worker's error.
  speedlabs::not_implemented("07", "07_profile", "PrefetchLoader::next");
}

// Why: a loop that stops early (an error, Ctrl-C, a step limit) must not leave a thread behind, and the
// worker may be asleep waiting for room in a full queue that nobody will empty.
// Hints:
// - under the lock: set stop_requested_, drop the queued batches, notify_all() (this wakes the worker);
// - then, *without* the lock (the worker needs it to see the flag), join the worker if joinable();
// - afterwards set finished_ so that next() returns nullopt instead of waiting forever;
// - a second call finds nothing to join: make sure that is fine.
void PrefetchLoader::stop() {
  // TODO(lab07): stop the worker and wait for it.
  speedlabs::not_implemented("07", "07_profile", "PrefetchLoader::stop");
}

}  // namespace lab07
