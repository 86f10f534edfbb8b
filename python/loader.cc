#include "python/loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>

#include "launch/loader/job_settings.h"
#include "launch/loader/sources.h"
#include "python/tensor_export.h"

namespace brigade::python {
namespace {

namespace py = pybind11;
using launch::ConfigError;

launch::RunConfig read_settings(const LoaderSettings& s, std::vector<std::string>& ignored) {
  launch::RunConfig c;
  // `brigade run`'s own keys: checked by the key table, listed as ignored.
  const launch::FrontEndSetting ignore = [&ignored](std::string_view key,
                                                    const launch::SettingValue&) {
    if (std::find(ignored.begin(), ignored.end(), key) == ignored.end()) ignored.emplace_back(key);
  };
  if (!s.config_file.empty()) launch::apply_toml_file(c, s.config_file, ignore);
  if (!s.keywords_toml.empty()) {
    try {
      launch::apply_toml(c, s.keywords_toml, s.keywords_name, ignore);
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
  if (c.rebalance) {
    throw ConfigError(
        "remote.rebalance: rank 0 weighs the ranks from brigade run's statistics reports "
        "(--stats), which the Python Loader does not send",
        "remote.rebalance");
  }
  return c;
}

// A vector of ids as an int64 tensor that owns it.
media::Tensor id_tensor(const std::vector<std::uint64_t>& ids) {
  auto owned = std::make_shared<std::vector<std::int64_t>>(ids.begin(), ids.end());
  void* data = owned->data();
  return media::Tensor(media::DType::int64, {static_cast<std::int64_t>(owned->size())},
                       std::shared_ptr<void>(owned, data), data);
}

// A batch's column (labels: int64, sources: int32) as a tensor that owns it (moved,
// not copied).
template <class T>
media::Tensor column_tensor(std::vector<T>&& values, media::DType dtype) {
  auto owned = std::make_shared<std::vector<T>>(std::move(values));
  void* data = owned->data();
  return media::Tensor(dtype, {static_cast<std::int64_t>(owned->size())},
                       std::shared_ptr<void>(owned, data), data);
}

// Whether `text` is all of an integer (a real number).
bool is_integer(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}
bool is_real(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// A Python stage's result on its way through the engine: released with the GIL, on
// whichever thread drops it (a batch dropped by a stop is released on the engine's).
struct Staged {
  py::object value;
  std::vector<std::weak_ptr<void>> held;  // the tokens of the device batches it was given
  ~Staged() {
    py::gil_scoped_acquire gil;
    value = py::object();
  }
};

}  // namespace

Loader::Loader(const LoaderSettings& settings, py::object converter, py::object stage,
               int stage_threads)
    : converter_(std::move(converter)), stage_fn_(std::move(stage)) {
  if (!stage_fn_.is_none() && !PyCallable_Check(stage_fn_.ptr()))
    throw ConfigError("python_stage: expected a callable", "python_stage");
  if (stage_threads < 1 || stage_threads > launch::kMaxConcurrency) {
    throw ConfigError(fmt::format("python_stage_threads: expected 1 to {}, got {}",
                                  launch::kMaxConcurrency, stage_threads),
                      "python_stage_threads");
  }
  if (!stage_fn_.is_none()) {
    // Captures the Loader, never a Python object: the job is destroyed without the GIL.
    stage_ = {.run = [this](launch::JobBatch b) { return run_stage(std::move(b)); },
              .concurrency = stage_threads,
              .name = "python_stage"};
  }
  py::gil_scoped_release release;
  config_ = read_settings(settings, ignored_);
  auto dataset = launch::open_dataset(config_, settings.demo);
  labelled_ = dataset.labelled();
  mixed_ = !dataset.sources().empty();
  job_ = std::make_unique<launch::Job>(config_, std::move(dataset),
                                       launch::JobOptions{.stage = stage_});
  const auto& d = job_->dataset();
  for (std::size_t m = 0; m < d.meta_columns().size(); ++m) {
    bool integer = true, real = true;
    for (std::size_t i = 0; i < d.size() && real; ++i) {
      const auto v = d.meta(i, m);
      integer = integer && is_integer(v);
      real = integer || is_real(v);
    }
    meta_types_.push_back(integer ? MetaType::integer : real ? MetaType::real : MetaType::text);
  }
}

std::shared_ptr<void> Loader::run_stage(launch::JobBatch batch) {
  py::gil_scoped_acquire gil;
  auto staged = std::make_shared<Staged>();
  py::object arg = to_python(std::move(batch), staged->held);
  staged->value = stage_fn_(arg);
  return staged;
}

Loader::~Loader() {
  py::gil_scoped_release release;
  job_.reset();
}

void Loader::set_epoch(std::uint64_t epoch) { requested_epoch_ = epoch; }

std::uint64_t Loader::epoch() const {
  if (requested_epoch_) return *requested_epoch_;
  if (job_->in_epoch()) return launch::epoch_of(job_->state());
  return job_->next_epoch();
}

void Loader::abandon() {
  handed_in_epoch_ = 0;
  py::gil_scoped_release release;
  job_->abandon_epoch();
}

bool Loader::begin() {
  stop_requested_ = false;  // a stop() between iterations stops nothing
  if (job_->in_epoch()) {
    // Continue an epoch that has handed out nothing yet (iter() twice), else leave it.
    if (handed_in_epoch_ == 0 &&
        (!requested_epoch_ || *requested_epoch_ == launch::epoch_of(job_->state()))) {
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
      epoch_ended_ = true;  // this iteration is over (stop() in loader.h)
      return std::nullopt;
    }
    launch::JobNext r;
    {
      py::gil_scoped_release release;
      r = job_->next(std::chrono::milliseconds(100));
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while waiting
    if (r.status == launch::JobStatus::timeout) continue;
    if (r.status == launch::JobStatus::epoch_end) {
      if (job_->finished()) hold_directory();
      return std::nullopt;
    }
    return std::move(*r.batch);
  }
}

void Loader::hold_directory() {
  if (held_directory_) return;
  held_directory_ = true;
  const auto until = std::chrono::steady_clock::now() + launch::kDirectoryHold;
  for (bool logged = false;;) {
    bool all = false;
    {
      py::gil_scoped_release release;
      all = job_->wait_for_ranks(std::chrono::milliseconds(logged ? 100 : 0));
    }
    if (all) return;
    if (!logged) {
      spdlog::info("brigade: keeping the directory until every rank has subscribed (at most {} s)",
                   launch::kDirectoryHold.count());
      logged = true;
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (std::chrono::steady_clock::now() >= until) {
      spdlog::warn("brigade: not every rank subscribed to the directory within {} s; closing it",
                   launch::kDirectoryHold.count());
      return;
    }
  }
}

py::object Loader::to_python(launch::JobBatch batch, Held& held) {
  auto convert = [this](media::Tensor t) -> py::object {
    py::object exported = py::cast(ExportedTensor(std::move(t)));
    return converter_.is_none() ? exported : converter_(exported);
  };
  py::dict out;
  if (batch.device.defined()) {
    auto token = std::make_shared<char>();
    held.push_back(token);
    py::object exported = py::cast(ExportedTensor(std::move(batch.device), std::move(token)));
    out["data"] = converter_.is_none() ? exported : converter_(exported);
  } else {
    out["data"] = convert(std::move(batch.data));
  }
  out["ids"] = convert(id_tensor(batch.ids));
  if (labelled_)
    out["label"] = convert(column_tensor(std::move(batch.labels), media::DType::int64));
  if (mixed_) out["source"] = convert(column_tensor(std::move(batch.sources), media::DType::int32));
  if (!batch.failed.empty()) out["failed"] = convert(id_tensor(batch.failed));
  if (!batch.meta.empty()) {
    py::dict meta;
    for (std::size_t m = 0; m < batch.meta.size(); ++m) {
      py::list values;
      for (const auto& v : batch.meta[m]) {
        if (meta_types_[m] == MetaType::integer) {
          std::int64_t n = 0;
          std::from_chars(v.data(), v.data() + v.size(), n);
          values.append(py::int_(n));
        } else if (meta_types_[m] == MetaType::real) {
          double x = 0;
          std::from_chars(v.data(), v.data() + v.size(), x);
          values.append(py::float_(x));
        } else {
          // Bytes that are not UTF-8 survive as lone surrogates (os.fsdecode's way).
          auto text = py::reinterpret_steal<py::object>(
              PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "surrogateescape"));
          if (!text) throw py::error_already_set();
          values.append(text);
        }
      }
      meta[py::str(config_.meta[m])] = values;
    }
    out["meta"] = meta;
  }
  return out;
}

py::object Loader::next() {
  if (epoch_ended_) return py::none();
  auto batch = next_job_batch();  // rethrows what the Python stage raised
  if (!batch) {
    epoch_ended_ = true;
    return py::none();
  }
  ++handed_in_epoch_;
  if (!batch->staged) return to_python(std::move(*batch), held_);
  auto& staged = *static_cast<Staged*>(batch->staged.get());
  held_.insert(held_.end(), staged.held.begin(), staged.held.end());  // now the loop's
  return staged.value;
}

void Loader::stop() { stop_requested_ = true; }

std::uint64_t Loader::batches_in_epoch() const {
  if (requested_epoch_) return job_->batches_in_epoch(*requested_epoch_);
  if (job_->in_epoch()) return job_->batches_in_epoch();
  return job_->finished() ? 0 : job_->batches_in_epoch(job_->next_epoch());
}

std::vector<std::byte> Loader::checkpoint_bytes() { return job_->checkpoint_bytes(); }

void Loader::restore(const std::vector<std::vector<std::byte>>& files) {
  auto loaded = launch::checkpoint_from_files(files, *config_.rank, *config_.world_size);
  auto config = config_;
  py::gil_scoped_release release;
  job_->stop();
  // The new job first: if the state conflicts with the settings, the old one stays.
  auto fresh = std::make_unique<launch::Job>(
      config, job_->dataset(), launch::JobOptions{.resume = std::move(loaded), .stage = stage_});
  job_ = std::move(fresh);
  held_directory_ = false;
  held_.clear();  // batches of the old job hold its device memory, not the new one's
  requested_epoch_.reset();
  epoch_ended_ = false;
  handed_in_epoch_ = 0;
}

std::string Loader::write_checkpoint() {
  if (config_.checkpoint_dir.empty())
    throw ConfigError("checkpoint_dir: not set; write_checkpoint() needs it", "checkpoint_dir");
  py::gil_scoped_release release;
  return job_->write_checkpoint().string();
}

}  // namespace brigade::python
