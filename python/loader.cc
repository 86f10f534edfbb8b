#include "python/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "launch/loader/demo_dataset.h"
#include "launch/loader/job_settings.h"
#include "python/tensor_export.h"

namespace brigade::python {
namespace {

namespace py = pybind11;
using launch::ConfigError;

launch::RunConfig read_settings(const LoaderSettings& s, std::vector<std::string>& ignored) {
  launch::RunConfig c;
  if (!s.config_file.empty()) launch::apply_toml_file(c, s.config_file);
  if (!s.keywords_toml.empty()) {
    try {
      launch::apply_toml(c, s.keywords_toml, s.keywords_name);
    } catch (const ConfigError& e) {
      // "brigade.Loader:3: batch_size: …": the line of a generated document means nothing
      // to the caller, the key does.
      std::string message = e.what();
      const auto prefix = s.keywords_name + ":";
      if (message.starts_with(prefix)) {
        auto end = message.find(": ", prefix.size());
        if (end != std::string::npos) message = s.keywords_name + message.substr(end);
      }
      throw ConfigError(message, e.key());
    }
    // Where a keyword argument set rank or world size, as errors name it.
    const auto line = s.keywords_name + ":";
    if (c.rank_origin.starts_with(line)) c.rank_origin = s.keywords_name + "(rank=…)";
    if (c.world_size_origin.starts_with(line))
      c.world_size_origin = s.keywords_name + "(world_size=…)";
  }
  // No epoch limit unless one is given (EPOCHS in loader.h).
  if (c.epochs_origin == "default") c.epochs = launch::kUnlimitedEpochs;
  std::map<std::string, std::string> env(s.environment.begin(), s.environment.end());
  launch::resolve(c, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  if (c.json) ignored.push_back("json");
  if (c.progress_origin != "default") ignored.push_back("progress");
  if (!c.ids_out.empty()) ignored.push_back("ids_out");
  if (!c.digests_out.empty()) ignored.push_back("digests_out");
  if (c.stop_after_batches >= 0) ignored.push_back("stop_after_batches");
  return c;
}

launch::Dataset read_dataset(const launch::RunConfig& c, bool demo_allowed) {
  if (!c.list.empty()) return launch::read_list(c.list);
  if (!c.data.empty()) return launch::list_folder(c.data, c.kind);
  if (!demo_allowed) {
    throw ConfigError(
        "data: no data given: pass data=DIR (a folder of media) or list=FILE (a file of paths), "
        "or demo=True for Brigade's synthetic demo set",
        "data");
  }
  return launch::list_folder(launch::demo_folder(c.kind).string(), c.kind);
}

// A vector of ids as an int64 tensor that owns it.
media::Tensor id_tensor(const std::vector<std::uint64_t>& ids) {
  auto owned = std::make_shared<std::vector<std::int64_t>>(ids.begin(), ids.end());
  void* data = owned->data();
  return media::Tensor(media::DType::int64, {static_cast<std::int64_t>(owned->size())},
                       std::shared_ptr<void>(owned, data), data);
}

}  // namespace

struct Loader::Pending {
  std::future<py::object> result;
  actors::SamplerState state;  // the job's state once this batch is handed out
  launch::JobCounts counts;
};

Loader::Loader(const LoaderSettings& settings, py::object converter, py::object stage,
               int stage_threads)
    : converter_(std::move(converter)), stage_(std::move(stage)) {
  if (!stage_.is_none() && !PyCallable_Check(stage_.ptr()))
    throw ConfigError("python_stage: expected a callable", "python_stage");
  if (stage_threads < 1 || stage_threads > launch::kMaxConcurrency) {
    throw ConfigError(fmt::format("python_stage_threads: expected 1 to {}, got {}",
                                  launch::kMaxConcurrency, stage_threads),
                      "python_stage_threads");
  }
  py::gil_scoped_release release;
  config_ = read_settings(settings, ignored_);
  job_ = std::make_unique<launch::Job>(config_, read_dataset(config_, settings.demo));
  if (!stage_.is_none()) pool_ = std::make_unique<StagePool>(stage_threads);
}

Loader::~Loader() {
  drop_pending();
  py::gil_scoped_release release;
  pool_.reset();
  job_.reset();
}

void Loader::set_epoch(std::uint64_t epoch) { requested_epoch_ = epoch; }

std::uint64_t Loader::epoch() const {
  if (requested_epoch_) return *requested_epoch_;
  if (job_->in_epoch()) return job_->state().epoch;
  return job_->next_epoch();
}

void Loader::abandon() {
  drop_pending();
  handed_out_state_.reset();
  handed_in_epoch_ = 0;
  py::gil_scoped_release release;
  job_->abandon_epoch();
}

bool Loader::begin() {
  stop_requested_ = stopped_ = false;  // a stop() between iterations stops nothing
  if (job_->in_epoch()) {
    // Continue an epoch that has handed out nothing yet (iter() twice), else leave it.
    if (handed_in_epoch_ == 0 && pending_.empty() &&
        (!requested_epoch_ || *requested_epoch_ == job_->state().epoch)) {
      requested_epoch_.reset();
      epoch_ended_ = false;
      return true;
    }
    abandon();
  }
  if (!requested_epoch_ && job_->finished()) return false;
  const auto e = requested_epoch_;
  requested_epoch_.reset();
  epoch_ended_ = false;
  handed_out_state_.reset();
  handed_in_epoch_ = 0;
  py::gil_scoped_release release;
  job_->begin_epoch(e);
  return true;
}

std::size_t Loader::held_device_batches() {
  std::erase_if(held_, [](const std::weak_ptr<void>& w) { return w.expired(); });
  return held_.size();
}

std::optional<launch::JobBatch> Loader::next_job_batch() {
  if (!config_.device.empty() && held_device_batches() >= launch::kDeviceBatches) {
    throw std::logic_error(fmt::format(
        "next: the loop holds {} batches on {}, as many as the loader keeps on the device; "
        "the next batch has no device memory to be copied into until one is released (del "
        "the batch, or .clone() what is kept)",
        held_.size(), config_.device));
  }
  for (;;) {
    if (stop_requested_.exchange(false)) {
      epoch_ended_ = stopped_ = true;  // this iteration is over (stop() in loader.h)
      return std::nullopt;
    }
    launch::JobNext r;
    {
      py::gil_scoped_release release;
      r = job_->next(std::chrono::milliseconds(100));
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while waiting
    if (r.status == launch::JobStatus::timeout) continue;
    if (r.status == launch::JobStatus::epoch_end) return std::nullopt;
    return std::move(*r.batch);
  }
}

py::object Loader::to_python(launch::JobBatch batch) {
  auto convert = [this](media::Tensor t) -> py::object {
    py::object exported = py::cast(ExportedTensor(std::move(t)));
    return converter_.is_none() ? exported : converter_(exported);
  };
  py::dict out;
  if (batch.device.defined()) {
    auto token = std::make_shared<char>();
    held_.push_back(token);
    py::object exported = py::cast(ExportedTensor(std::move(batch.device), std::move(token)));
    out["data"] = converter_.is_none() ? exported : converter_(exported);
  } else {
    out["data"] = convert(std::move(batch.data));
  }
  out["ids"] = convert(id_tensor(batch.ids));
  if (!batch.failed.empty()) out["failed"] = convert(id_tensor(batch.failed));
  return out;
}

void Loader::fill_stage() {
  while (!epoch_ended_ && pending_.size() < static_cast<std::size_t>(pool_->threads())) {
    // Held device batches: wait for the stage's results first (DEVICE).
    if (!pending_.empty() && !config_.device.empty() &&
        held_device_batches() >= launch::kDeviceBatches)
      break;
    if (pending_.empty()) {  // everything returned so far is handed out
      handed_out_state_ = job_->state();
      handed_out_counts_ = job_->counts();
    }
    auto batch = next_job_batch();
    if (!batch) {
      epoch_ended_ = true;
      break;
    }
    auto promise = std::make_shared<std::promise<py::object>>();
    pending_.push_back({promise->get_future(), job_->state(), job_->counts()});
    // Every Python object the task holds dies inside its GIL scope (declared after it).
    pool_->submit([promise, fn = stage_, arg = to_python(std::move(*batch))]() mutable {
      py::gil_scoped_acquire gil;
      auto done = std::move(promise);
      py::object f = std::move(fn), a = std::move(arg);
      try {
        done->set_value(f(a));
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
}

py::object Loader::next() {
  if (!pool_) {
    if (epoch_ended_) return py::none();
    auto batch = next_job_batch();
    if (!batch) {
      epoch_ended_ = true;
      return py::none();
    }
    ++handed_in_epoch_;
    return to_python(std::move(*batch));
  }
  fill_stage();
  if (stopped_) {
    stopped_ = false;
    drop_pending();  // handed_out_state_ still covers exactly what was handed out
    return py::none();
  }
  if (pending_.empty()) {
    handed_out_state_.reset();  // the epoch is over: the job's state is exact again
    return py::none();
  }
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  {
    py::gil_scoped_release release;
    p.result.wait();
  }
  handed_out_state_ = std::move(p.state);
  handed_out_counts_ = p.counts;
  ++handed_in_epoch_;
  return p.result.get();  // the Python stage's exception, if it raised
}

void Loader::drop_pending() {
  for (auto& p : pending_) {
    py::gil_scoped_release release;
    p.result.wait();
  }
  pending_.clear();
}

void Loader::stop() { stop_requested_ = true; }

std::uint64_t Loader::batches_in_epoch() const {
  if (requested_epoch_) return job_->batches_in_epoch(*requested_epoch_);
  if (job_->in_epoch()) return job_->batches_in_epoch();
  return job_->finished() ? 0 : job_->batches_in_epoch(job_->next_epoch());
}

launch::JobCounts Loader::counts() const {
  return handed_out_state_ ? handed_out_counts_ : job_->counts();
}

std::vector<std::byte> Loader::checkpoint_bytes() {
  // With batches in the Python stage the job's state counts them, the handed-out one not.
  return job_->checkpoint_bytes(handed_out_state_);
}

void Loader::restore(const std::vector<std::vector<std::byte>>& files) {
  auto loaded = launch::checkpoint_from_files(files, *config_.rank, *config_.world_size);
  drop_pending();
  auto config = config_;
  py::gil_scoped_release release;
  job_->stop();
  // The new job first: if the state conflicts with the settings, the old one stays.
  auto fresh = std::make_unique<launch::Job>(config, job_->dataset(),
                                             launch::JobOptions{.resume = std::move(loaded)});
  job_ = std::move(fresh);
  held_.clear();  // batches of the old job hold its device memory, not the new one's
  requested_epoch_.reset();
  epoch_ended_ = false;
  handed_out_state_.reset();
  handed_in_epoch_ = 0;
}

std::string Loader::write_checkpoint() {
  if (config_.checkpoint_dir.empty())
    throw ConfigError("checkpoint_dir: not set; write_checkpoint() needs it", "checkpoint_dir");
  py::gil_scoped_release release;
  return job_->write_checkpoint(handed_out_state_).string();
}

}  // namespace brigade::python
