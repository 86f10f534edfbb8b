// The extension module brigade._brigade (python/brigade/__init__.py is its face):
// Loader, Tensor, the error translation and the synthetic-media writer
// (launch/loader/demo_dataset.h).

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <mutex>

#include "actors/errors.h"
#include "actors/stats.h"
#include "launch/loader/decode.h"
#include "launch/loader/demo_dataset.h"
#include "launch/loader/job.h"
#include "python/loader.h"
#include "python/tensor_export.h"
#include "transport/device/device.h"

namespace py = pybind11;
using namespace brigade;

namespace {

// Raises brigade.errors.<name>(*args) as the current Python exception.
[[noreturn]] void raise(const char* name, const py::tuple& args) {
  py::object type = py::module_::import("brigade.errors").attr(name);
  py::object error = type(*args);
  PyErr_SetObject(type.ptr(), error.ptr());
  throw py::error_already_set();
}

// A failure record as a dict: its fields as the engine keeps them (no text parsed).
// `code` is the error code's name ("bad_data", "timed_out", "lost_on_attempts").
py::dict cause(const actors::SampleFailure& r) {
  py::dict d;
  d["stage"] = r.stage;
  d["message"] = r.message();
  const auto code = launch::error_code_name(r.code);
  d["code"] = code.empty() ? py::object(py::none()) : py::object(py::str(code));
  d["id"] = r.id ? py::object(py::int_(*r.id)) : py::object(py::none());
  d["path"] = r.id ? py::object(py::str(r.path)) : py::object(py::none());
  d["cause"] = r.cause;
  d["positions"] = std::vector<std::uint64_t>(r.positions.begin(), r.positions.end());
  return d;
}

// A failure budget exceeded: DecodeError naming the last failed sample, or
// PipelineError when no failure names one.
[[noreturn]] void raise_failure(const actors::PipelineFailure& e) {
  py::list causes;
  py::object last_sample = py::none();
  for (const auto& r : e.recent()) {
    auto d = cause(r);
    if (r.id) last_sample = d;
    causes.append(d);
  }
  if (last_sample.is_none()) raise("PipelineError", py::make_tuple(e.what(), causes));
  raise("DecodeError",
        py::make_tuple(e.what(), causes, last_sample["id"], last_sample["path"],
                       last_sample["cause"], last_sample["code"], last_sample["stage"]));
}

template <typename F>
auto translating(F&& f) {
  try {
    return f();
  } catch (const actors::PipelineFailure& e) {
    raise_failure(e);
  }
}

// A record's figures as actors/stats.h describes them (the keys of `brigade run --json`).
template <class Record>
void put_figures(py::dict& d, const Record& record,
                 std::span<const actors::Figure<Record>> figures) {
  actors::for_each_figure(record, figures, [&](std::string_view key, const auto& value) {
    d[py::str(key.data(), key.size())] = value;
  });
}

py::dict stats_dict(python::Loader& loader) {
  const auto st = loader.stats();
  const auto counts = loader.counts();
  py::dict d;
  py::list stages;
  for (const auto& s : st.stages) {
    py::dict stage;
    put_figures(stage, s, actors::stage_figures());
    stages.append(stage);
  }
  d["stages"] = stages;
  py::dict sink;
  put_figures(sink, st.sink, actors::sink_figures());
  d["sink"] = sink;
  put_figures(d, st, actors::pipeline_figures());
  py::list recent;
  for (const auto& r : st.recent_failures) recent.append(cause(r));
  d["recent_failures"] = recent;
  py::dict c;
  c["samples"] = counts.samples;
  c["batches"] = counts.batches;
  c["failed"] = counts.failed;
  c["filtered"] = counts.filtered;
  d["counts"] = c;
  return d;
}

std::vector<std::byte> as_bytes(const py::bytes& b) {
  const std::string_view v = b;
  const auto* p = reinterpret_cast<const std::byte*>(v.data());
  return {p, p + v.size()};
}

py::bytes to_bytes(const std::vector<std::byte>& v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

// Brigade's log lines (sample failures, warnings), kept for Python's `logging` (the
// "brigade" logger, python/brigade/__init__.py). The sink never takes the GIL: the
// engine's threads log while Python may hold it. The Python side takes the lines
// whenever it runs (each batch, the end of an iteration); at most kMaxLines wait, the
// rest are counted and reported as one line.
class PythonLogSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static constexpr std::size_t kMaxLines = 10000;

  std::vector<std::pair<int, std::string>> take() {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<int, std::string>> out(lines_.begin(), lines_.end());
    lines_.clear();
    if (dropped_ > 0) {
      out.emplace_back(
          static_cast<int>(spdlog::level::warn),
          fmt::format("brigade: {} log lines dropped (more than {} waiting)", dropped_, kMaxLines));
      dropped_ = 0;
    }
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (lines_.size() >= kMaxLines) {
      ++dropped_;
      return;
    }
    lines_.emplace_back(static_cast<int>(msg.level),
                        std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  std::deque<std::pair<int, std::string>> lines_;
  std::uint64_t dropped_ = 0;
};

std::shared_ptr<PythonLogSink> python_log_sink() {
  static const auto sink = std::make_shared<PythonLogSink>();
  return sink;
}

}  // namespace

PYBIND11_MODULE(_brigade, m) {
  m.doc() = "Brigade's C++ loader (use the brigade package, not this module)";
  // Brigade's log lines go to Python's logging, not to stderr (take_log()).
  spdlog::default_logger()->sinks() = {python_log_sink()};
  m.def(
      "take_log", [] { return python_log_sink()->take(); },
      "Brigade's log lines since the last call: (spdlog level 0-6, message)");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const launch::ConfigError& e) {
      raise("ConfigError", py::make_tuple(e.what(), e.key()));
    } catch (const launch::CheckpointError& e) {
      raise("CheckpointError", py::make_tuple(e.what(), to_string(e.kind()), e.file().string()));
    } catch (const actors::PipelineFailure& e) {
      raise_failure(e);
    } catch (const transport::DeviceError& e) {  // a batch's copy failed on the device
      raise("PipelineError", py::make_tuple(e.what(), py::list()));
    }
  });

  py::class_<python::ExportedTensor>(m, "Tensor", R"(A batch tensor in C++ memory, exported
through DLPack without a copy (torch.from_dlpack, numpy.from_dlpack).)")
      .def("__dlpack__", &python::ExportedTensor::dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &python::ExportedTensor::dlpack_device)
      .def_property_readonly("data_ptr", &python::ExportedTensor::data_ptr,
                             "address of the first element (the C++ buffer's)")
      .def_property_readonly("buffer_ptr", &python::ExportedTensor::buffer_ptr,
                             "address of the pooled buffer the tensor lives in")
      .def_property_readonly("shape", &python::ExportedTensor::shape)
      .def_property_readonly(
          "dtype",
          [](const python::ExportedTensor& t) { return std::string(media::dtype_name(t.dtype())); })
      .def_property_readonly("device", &python::ExportedTensor::device,
                             "where the memory is: 'cpu' or 'cuda:N'");

  py::class_<python::Loader>(m, "Loader")
      .def(py::init([](const std::string& config_file, const std::string& keywords_toml,
                       const std::string& keywords_name,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       py::object converter, py::object stage, int stage_threads, bool demo) {
             return std::make_unique<python::Loader>(
                 python::LoaderSettings{config_file, keywords_toml, keywords_name, demo, env},
                 std::move(converter), std::move(stage), stage_threads);
           }),
           py::arg("config_file"), py::arg("keywords_toml"), py::arg("keywords_name"),
           py::arg("environment"), py::arg("converter"), py::arg("python_stage"),
           py::arg("python_stage_threads"), py::arg("demo") = false)
      .def("begin", &python::Loader::begin)
      .def("next", [](python::Loader& l) { return translating([&] { return l.next(); }); })
      .def("stop", &python::Loader::stop)
      .def("set_epoch", &python::Loader::set_epoch)
      .def_property_readonly("epoch", &python::Loader::epoch)
      .def("batches_in_epoch", &python::Loader::batches_in_epoch)
      .def("checkpoint_bytes", [](python::Loader& l) { return to_bytes(l.checkpoint_bytes()); })
      .def("restore",
           [](python::Loader& l, const std::vector<py::bytes>& files) {
             std::vector<std::vector<std::byte>> raw;
             for (const auto& f : files) raw.push_back(as_bytes(f));
             l.restore(raw);
           })
      .def("write_checkpoint", &python::Loader::write_checkpoint)
      .def("stats", &stats_dict)
      .def_property_readonly("ignored_keys", &python::Loader::ignored_keys)
      .def_property_readonly("rank", [](const python::Loader& l) { return *l.config().rank; })
      .def_property_readonly("world_size",
                             [](const python::Loader& l) { return *l.config().world_size; })
      .def_property_readonly("batch_size",
                             [](const python::Loader& l) { return *l.config().batch_size; })
      .def_property_readonly("classes",
                             [](const python::Loader& l) { return l.dataset().classes(); })
      .def_property_readonly("sources",
                             [](const python::Loader& l) {
                               std::vector<std::string> names;
                               for (const auto& s : l.dataset().sources()) names.push_back(s.name);
                               return names;
                             })
      .def_property_readonly("source_classes",
                             [](const python::Loader& l) {
                               std::vector<std::vector<std::string>> classes;
                               for (const auto& s : l.dataset().sources())
                                 classes.push_back(s.classes);
                               return classes;
                             })
      .def_property_readonly("files", [](const python::Loader& l) {
        const auto& d = l.dataset();
        std::vector<std::string> files;
        files.reserve(d.size());
        for (std::size_t i = 0; i < d.size(); ++i) files.push_back(d.path(i));
        return files;
      });

  m.def(
      "cuda_devices", [] { return transport::cuda_availability().devices; },
      "GPUs this process can use through Brigade's CUDA build (0 without one)");
  m.def(
      "write_synthetic_images",
      [](const std::string& folder, int count, int width, int height, std::uint64_t seed,
         const std::string& codec) {
        return launch::write_synthetic_images(folder, {count, width, height, seed, codec});
      },
      py::arg("folder"), py::arg("count"), py::arg("width") = 64, py::arg("height") = 48,
      py::arg("seed") = 0, py::arg("codec") = "jpeg", py::call_guard<py::gil_scoped_release>());
}
