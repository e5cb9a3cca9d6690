/// @file labs/07_profile/src/feeding.h
/// @brief Keeping the device fed: batches whose preparation costs real time (tokenizing documents on the
/// fly), consumed by a training loop synchronously and through the prefetching loader of the exercise.
#pragma once
#include <c10/core/Device.h>
#include "common/contention.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpt_config.h"
#include "common/observations.h"
#include "datasets/data_loader.h"
#include "datasets/gpt2_tokenizer.h"

namespace lab07 {

/// Makes training batches from raw text the way an on-the-fly pipeline does: each sequence of batch i
/// comes from a "document" (a window of doc_bytes of the text at a random offset), which is tokenized
/// whole with the GPT-2 tokenizer, and a random crop of T+1 of its tokens becomes x and y. The whole
/// document is tokenized because a crop's tokens depend on the text before it.
/// Deterministic: batch i depends only on the seed and i, whichever thread makes it and when.
class DocumentBatches {
 public:
  /// Throws speedlabs::UsageError when a document of @p doc_bytes is longer than the text or holds
  /// fewer than T+1 tokens.
  /// @param tokenizer the GPT-2 tokenizer (kept by reference; it must outlive this object)
  /// @param text      the raw text (tiny shakespeare)
  /// @param batch     B
  /// @param seq       T
  /// @param doc_bytes bytes of text tokenized per sequence
  /// @param pin       put each batch in pinned (page-locked) host memory, for non_blocking copies to a GPU
  /// @param seed      the seed of the offsets and crops
  DocumentBatches(const datasets::GPT2Tokenizer& tokenizer, std::string text, int64_t batch, int64_t seq,
                  int64_t doc_bytes, bool pin, uint64_t seed = 7);

  /// Batch number @p index: (B, T) int64 x and y on the CPU, pinned when asked for.
  /// @param index the batch's number (any order; the same index always gives the same batch)
  datasets::Batch make(int64_t index) const;

 private:
  const datasets::GPT2Tokenizer& tokenizer_;
  std::string text_;
  int64_t batch_, seq_, doc_bytes_;
  bool pin_;
  uint64_t seed_;
};

/// The same training loop fed two ways.
struct FeedResult {
  double load_ms = 0;           ///< median time to make one batch (inside the synchronous steps)
  double sync_step_ms = 0;      ///< median wall time of a step that makes its own batch
  double prefetch_step_ms = 0;  ///< median wall time of a step that takes its batch from the PrefetchLoader
  double wait_ms = 0;           ///< median time a prefetched step waited in next()
  int torch_threads = 0;        ///< intra-op threads of the training step during the comparison
  int cores = 0;                ///< hardware threads of this machine
  double free_cores = 0;        ///< cores free of other programs over the pairs of blocks: the fewest a pair left
  double others_cores = -1;     ///< cores' worth of CPU other programs used over that pair; -1: not readable here
  bool same_batches = false;    ///< every batch the loader gave is the one make() gives for its index
  bool all_pinned = false;      ///< every batch the loader gave was in pinned memory (GPU runs)
  double last_loss = 0;         ///< the last step's loss
  /// Per pair of blocks (a synchronous block and the prefetched block after it): the median step time saved
  /// over the block's median loading time. At most 1: prefetching can hide the loading, no more.
  std::vector<double> hidden_shares;
  std::vector<double> load_samples_ms;  ///< each synchronous step's loading time
  speedlabs::Contention contention;     ///< the machine while the two ways were measured
};

/// Trains one model (@p model_config, fixed seed) for @p warmup steps, then @p steps steps each way, the
/// two ways alternating in blocks of 4 steps: a block that makes each batch inside the step, then a block
/// that takes the batches from a PrefetchLoader of capacity @p prefetch, started for the block and stopped
/// early at its end. Every step is timed whole (batch, copy, forward, backward, update, synchronize).
/// On the CPU the step runs with one intra-op thread fewer than there are cores (at least one), in both
/// ways, so that the worker has a core of its own. Batches are copied to @p device with
/// non_blocking=true (from pinned memory on a GPU).
/// A probe over each pair of blocks reads the CPU other programs used meanwhile (this process's own threads,
/// libtorch's intra-op pool and the loader's worker included, are not other programs); free_cores is the fewest
/// cores a pair left free of them (free_cores_of), others_cores what the other programs used over that pair.
/// Throws speedlabs::RuntimeFailure when a loss is not finite.
/// @param batches      the batch maker
/// @param model_config the model's size
/// @param lr           AdamW learning rate
/// @param warmup       steps before the clock starts
/// @param steps        timed steps of each way
/// @param prefetch     the loader's queue capacity
/// @param device       where to train
FeedResult compare_loaders(const DocumentBatches& batches, const speedlabs::gpt::GPTConfig& model_config, double lr,
                           int warmup, int steps, int64_t prefetch, const c10::Device& device);

/// How many cores other programs left to this run over @p window: its cores less the cores' worth of CPU the
/// rest of the machine used (others_cores), whatever this process and the processes below it used themselves.
/// 0 (none counts as free) when what the others used could not be read, or over a window too short to read.
/// @param window a ContentionProbe's reading over the time the cores were needed
double free_cores_of(const speedlabs::Contention& window);

/// Prints what the loaders measured and records loader_cost_ms, prefetch_same_batches, prefetch_hides_loading
/// (not applicable without a core for the worker) and batches_pinned (GPU).
/// @param feed   compare_loaders()'s result
/// @param device where the loop trained
/// @param report receives the observations
void observe_feeding(const FeedResult& feed, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab07
