#include "launch/loader/remote_ops.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>

#include "launch/loader/decode_task.h"

namespace brigade::launch {
namespace {

using transport::RemoteError;

std::size_t sample_bytes(const DecodeSpec& spec) {
  std::size_t n = 1;
  for (auto d : sample_shape(spec)) n *= static_cast<std::size_t>(d);
  return n;
}

// The worker's operation: read, then decode into the result message (no copy between
// the decoder and the message).
std::vector<char> run_decode(std::span<const char> bytes,
                             const std::vector<SampleLocation>& dataset, MediaKind expected,
                             const transport::OperationContext& context) {
  auto task = read_decode_task(bytes, static_cast<std::size_t>(kMaxBatchSize));
  if (task.spec.kind != expected) throw RemoteError("a task of another kind for this operation");
  for (auto& s : task.samples) {
    if (!dataset.empty()) {
      if (s.id >= dataset.size()) {
        throw RemoteError(
            fmt::format("sample {} is past this worker's {} samples", s.id, dataset.size()));
      }
      s = encoded_sample(s.id, dataset[s.id]);
    }
  }
  for (auto& s : task.samples) {
    if (context.stop.stop_requested()) throw RemoteError("cancelled");
    read_sample(s);
  }
  return write_decode_result([&](const media::Allocator& allocator) {
    return decode_batch(task.spec, task.samples, allocator);
  });
}

// A result checked against its task (CHECKS in remote_ops.h).
struct Part {
  std::vector<const std::uint8_t*> rows;  // per task sample: its row, or null if failed
  std::vector<BatchFailure> failures;     // index: in the task
  std::shared_ptr<const void> keep;       // owns the rows: the result read, or the tensor
};

Part check_result(transport::SharedBytes bytes, const DecodeSpec& spec,
                  std::span<const EncodedSample> task) {
  auto r = read_decode_result(std::move(bytes));
  Part part;
  part.keep = r.keep;
  const auto row = sample_bytes(spec);
  auto want = sample_shape(spec);
  want.insert(want.begin(), static_cast<std::int64_t>(r.ids.size()));
  if (r.shape != want) throw RemoteError("a result of another shape");
  if (r.data.size() != r.ids.size() * row) {
    throw RemoteError(fmt::format("a result of {} bytes for {} samples of {} bytes", r.data.size(),
                                  r.ids.size(), row));
  }
  part.rows.assign(task.size(), nullptr);
  std::vector<bool> seen(task.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    while (next < task.size() && task[next].id != r.ids[i]) ++next;
    if (next == task.size())
      throw RemoteError("a result with samples not in its task, or out of order");
    part.rows[next] = r.data.data() + i * row;
    seen[next++] = true;
  }
  for (auto& f : r.failures) {
    if (f.index >= task.size() || f.id != task[f.index].id || seen[f.index]) {
      throw RemoteError("a result whose failures do not match its task");
    }
    seen[f.index] = true;
    part.failures.push_back(std::move(f));
  }
  for (std::size_t i = 0; i < task.size(); ++i)
    if (!seen[i]) throw RemoteError(fmt::format("a result that leaves out sample {}", task[i].id));
  return part;
}

// Samples decoded here, as a part (for want of a worker).
Part decode_here(const DecodeSpec& spec, std::span<const EncodedSample> task) {
  std::vector<EncodedSample> samples(task.begin(), task.end());
  for (auto& s : samples) read_sample(s);
  auto decoded = decode_batch(spec, samples, {});
  Part part;
  part.rows.assign(task.size(), nullptr);
  const auto row = sample_bytes(spec);
  auto* base = static_cast<const std::uint8_t*>(decoded.data.data());
  std::size_t i = 0;
  for (std::size_t k = 0; k < task.size() && i < decoded.ids.size(); ++k)
    if (task[k].id == decoded.ids[i]) part.rows[k] = base + (i++) * row;
  part.failures = std::move(decoded.failures);
  part.keep = decoded.data.owner();
  return part;
}

// The batch as a view of the one part that holds all its delivered rows, when they lie
// one after another in the task's order (share_result); nullopt otherwise.
std::optional<media::Tensor> shared_rows(const std::vector<Part>& parts,
                                         const std::vector<const std::uint8_t*>& rows,
                                         const std::vector<std::optional<BatchFailure>>& failed,
                                         std::size_t row, const std::vector<std::int64_t>& shape) {
  if (parts.size() != 1 || !parts.front().keep) return std::nullopt;
  const std::uint8_t* first = nullptr;
  const std::uint8_t* next = nullptr;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (failed[i] || !rows[i]) continue;
    if (!first) {
      first = next = rows[i];
    } else if (rows[i] != next) {
      return std::nullopt;
    }
    next += row;
  }
  if (!first) return std::nullopt;
  // The result's memory is this batch's alone (received for it, never shared with a
  // peer), so the tensor may hold it as writable.
  return media::Tensor(media::DType::uint8, shape,
                       std::const_pointer_cast<void>(parts.front().keep),
                       const_cast<std::uint8_t*>(first));
}

}  // namespace

void register_decode_operations(transport::OperationRegistry& registry,
                                std::vector<SampleLocation> dataset) {
  auto shared = std::make_shared<const std::vector<SampleLocation>>(std::move(dataset));
  registry.add(kDecodeImages, [shared](std::span<const char> task, const auto& context) {
    return run_decode(task, *shared, MediaKind::image, context);
  });
  registry.add(kDecodeClips, [shared](std::span<const char> task, const auto& context) {
    return run_decode(task, *shared, MediaKind::video, context);
  });
}

std::optional<DecodedBatch> remote_decode_batch(transport::RemotePool& pool, const DecodeSpec& spec,
                                                std::span<EncodedSample> samples,
                                                const media::Allocator& allocator,
                                                const RemoteDecodeOptions& options,
                                                std::stop_token stop,
                                                RemoteDecodeFigures* figures) {
  using transport::CallStatus;
  const auto& op = spec.kind == MediaKind::video ? kDecodeClips : kDecodeImages;
  const std::size_t n = samples.size();
  std::vector<const std::uint8_t*> rows(n, nullptr);
  std::vector<std::optional<BatchFailure>> failed(n);
  std::vector<int> losses(n, 0);
  // Attempts lost before their worker started them (it died or froze with them queued,
  // or they were sent to a worker already dead): not the samples' fault, so they do not
  // count, and the group is sent again whole. Bounded all the same, in case a worker
  // dies before its "started" can reach us: beyond it they count.
  int unstarted = 0;
  const int max_unstarted = 8 * std::max(1, options.max_attempts);
  std::vector<Part> parts;  // own the rows until the batch is assembled
  std::deque<std::vector<std::size_t>> work(1);
  for (std::size_t i = 0; i < n; ++i) work.front().push_back(i);
  std::string avoid;
  auto fail = [&](std::size_t i, const std::string& cause, std::error_code code) {
    failed[i] = BatchFailure{
        {.id = samples[i].id, .path = samples[i].path, .code = code, .cause = cause}, i};
  };
  // Maps a part's rows and failures (indices into `group`) onto the batch's samples.
  auto take = [&](Part part, const std::vector<std::size_t>& group) {
    for (std::size_t k = 0; k < group.size(); ++k) rows[group[k]] = part.rows[k];
    for (auto& f : part.failures) {
      const auto i = group[f.index];
      f.index = i;
      failed[i] = std::move(f);
    }
    parts.push_back(std::move(part));
  };
  while (!work.empty()) {
    if (stop.stop_requested()) return std::nullopt;
    auto group = std::move(work.front());
    work.pop_front();
    std::vector<EncodedSample> task;
    for (auto i : group) {
      const auto& s = samples[i];
      task.push_back({.id = s.id, .path = s.path, .offset = s.offset, .size = s.size});
    }
    auto r = pool.call(op.name, write_decode_task(spec, task), stop, avoid);
    if (r.status == CallStatus::done) {
      try {
        take(check_result(std::move(r.bytes), spec, task), group);
        continue;
      } catch (const RemoteError& e) {
        r.status = CallStatus::lost;
        r.started = true;  // it ran: the loss counts
        r.reason = fmt::format("worker {} sent a result that does not match its task ({})",
                               r.worker, e.what());
      }
    }
    switch (r.status) {
      case CallStatus::done:
        break;
      case CallStatus::failed:
        for (auto i : group)
          fail(i, fmt::format("worker {}: {}", r.worker, r.reason), transport::RemoteErrc::failed);
        break;
      case CallStatus::lost:
        if (figures) ++figures->attempts_lost;
        avoid = r.worker;
        if (!r.started && ++unstarted <= max_unstarted) {
          work.push_front(std::move(group));
          break;
        }
        {
          std::vector<std::size_t> together;  // samples with two attempts or more to spare
          for (auto i : group) {
            if (++losses[i] >= options.max_attempts) {
              fail(i, fmt::format("lost on {} attempts ({})", losses[i], r.reason),
                   transport::RemoteErrc::lost_on_attempts);
            } else if (group.size() > 1 && options.max_attempts - losses[i] >= 2) {
              together.push_back(i);  // one more shared loss cannot fail them
            } else if (group.size() > 1) {
              work.push_back({i});  // its last attempt: alone, so a poison sample fails alone
            }
          }
          if (!together.empty()) work.push_back(std::move(together));
        }
        if (group.size() == 1 && !failed[group[0]]) work.push_front(group);
        break;
      case CallStatus::no_workers:
        if (options.local_fallback) {
          if (figures) figures->decoded_locally += group.size();
          take(decode_here(spec, task), group);
        } else {
          pool.wait_for_worker(std::chrono::seconds(1), stop);
          work.push_front(std::move(group));
        }
        break;
      case CallStatus::stopped:
        return std::nullopt;
    }
  }
  DecodedBatch batch;
  const auto row = sample_bytes(spec);
  std::int64_t good = 0;
  for (std::size_t i = 0; i < n; ++i) good += (rows[i] && !failed[i]) ? 1 : 0;
  auto shape = sample_shape(spec);
  shape.insert(shape.begin(), good);
  if (options.share_result && good > 0) {
    if (auto view = shared_rows(parts, rows, failed, row, shape)) {
      batch.data = std::move(*view);
      for (std::size_t i = 0; i < n; ++i) {
        if (failed[i]) {
          batch.failures.push_back(std::move(*failed[i]));
        } else if (rows[i]) {
          batch.ids.push_back(samples[i].id);
        }
      }
      return batch;
    }
  }
  // One copy of every row into the batch, in the task's order.
  try {
    batch.data = media::Tensor::empty(media::DType::uint8, shape, allocator);
  } catch (const std::bad_alloc&) {
    // As decode_task does locally: every sample of the batch fails, counted one by one.
    for (std::size_t i = 0; i < n; ++i) {
      if (failed[i] || !rows[i]) continue;
      fail(i, fmt::format("out of memory allocating a batch of {} × {} bytes", good, row),
           std::make_error_code(std::errc::not_enough_memory));
    }
    shape[0] = 0;
    batch.data = media::Tensor::empty(media::DType::uint8, shape, {});
  }
  auto* out = static_cast<std::uint8_t*>(batch.data.data());
  for (std::size_t i = 0; i < n; ++i) {
    if (failed[i]) {
      batch.failures.push_back(std::move(*failed[i]));
    } else if (rows[i]) {
      std::memcpy(out + batch.ids.size() * row, rows[i], row);
      batch.ids.push_back(samples[i].id);
    }
  }
  return batch;
}

}  // namespace brigade::launch
