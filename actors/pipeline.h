#pragma once

// The pipeline builder and the running pipeline: Brigade's SPDL-like front door.
//
//   auto pipeline = PipelineBuilder()
//       .add_source(std::vector<std::string>{...})          // a range, std::ref(range) or next()
//       .pipe(read_bytes, {.concurrency = 8, .executor = Executor::io, .name = "read"})
//       .pipe(decode, {.concurrency = 2, .output_order = Order::input, .name = "decode"})
//       .aggregate(32)
//       .pipe(collate)
//       .add_sink(4)
//       .build({.num_threads = 2});
//   for (auto& batch : pipeline) train_step(batch);
//
// Where Brigade differs from SPDL, and why:
// - Stages run truly in parallel (no GIL); cpu stages share `num_threads` CAF scheduler
//   threads, io stages get one thread per worker.
// - Tasks that measure cheaper than 0.5 µs (a no-op, a field lookup) run on the stage's
//   coordinator, a chunk at a time, instead of travelling to a worker and back: the
//   hop would cost more than the tasks, and the stage still runs above 1 M items/s.
//   io stages never do (their tasks may block).
// - Default output order is `input` (SPDL: completion): deterministic and resumable.
//   Its reorder window is bounded by the stage's capacity (concurrency + queue), not
//   by `concurrency` alone: cheap tasks travel to a worker in chunks (one message for
//   many items), and a chunk's results come back together; the memory bound holds.
// - A stage that emits several items per input is `generate()` with an Emitter, so a
//   function returning a std::vector stays an ordinary map.
// - `retry` exists for io stages (SPDL has none).
// - Builder methods consume the builder (call them on a temporary or std::move it).
//
// MEMORY BOUND (a contract, checked by tests with a slow consumer). A stage holds at
// most `capacity` items — running, queued, finished and waiting for order or for
// downstream credit — where capacity = concurrency + queue_capacity (default
// queue_capacity = 2 × concurrency), and 2 × n for aggregate(n) counted in its input
// items. The sink holds at most `buffer_size`, the consumer one more. So the items
// alive in a run are at most
//     Σ_stages capacity × (items per stage input) + (buffer_size + 1) × (items per output)
// which `Pipeline::item_bound()` returns, counted in source items. It does not grow
// with the epoch. A generate()/disaggregate() stage may exceed its capacity by the
// fan-out of the inputs it is running (outputs of one input are produced together);
// a custom aggregator bounds what it accumulates itself.
//
// Credit: a stage asks upstream for more only while it has free capacity, in grants
// of at least a quarter of its capacity; items travel in batches. No mailbox holds
// more than its stage's bound.
//
// THREADING. Stage functions are called concurrently by up to `concurrency` threads
// and must be thread-safe; they may throw (the item is dropped and recorded, see
// FailureBudget), may filter by returning an empty std::optional, and may take a
// TaskContext& last to report failed samples of their input or to see a stop
// request. The pipeline object is driven by one consumer thread; stop(), stats() and
// committed() may be called from any thread, and stats()/committed() never wait for a
// stop in progress. stop() cancels queued work, requests the tasks' stop token and
// waits for running tasks to return: a function that waits on something outside the
// process must wait on that token too (TaskContext), or stop() waits for it.
//
// Internals (traits, cursors, erased aggregators) live in actors/detail/builder.h.

#include <chrono>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "actors/detail/builder.h"
#include "actors/detail/engine.h"
#include "actors/errors.h"
#include "actors/hooks.h"
#include "actors/options.h"
#include "actors/positions.h"
#include "actors/stats.h"
#include "actors/task.h"

namespace brigade::actors {

template <class T>
class Pipeline;
template <class T = void>
class PipelineBuilder;

/// Handed to a generate() stage function: each call emits one output item, which
/// carries the input's source positions. Not thread-safe; valid during the call only.
template <class U>
class Emitter {
 public:
  void operator()(U value) { out_.push_back(detail::AnyValue::make(std::move(value))); }
  void emit(U value) { (*this)(std::move(value)); }

 private:
  template <class>
  friend class PipelineBuilder;
  explicit Emitter(std::vector<detail::AnyValue>& out) : out_(out) {}
  std::vector<detail::AnyValue>& out_;
};

/// The result of Pipeline::next(): an item with its positions, a timeout, or the end.
template <class T>
struct NextResult {
  NextStatus status = NextStatus::end;
  std::optional<T> item;
  Positions positions;
  explicit operator bool() const { return status == NextStatus::item; }
};

/// Builds a pipeline stage by stage; the type parameter is the current output type.
/// Bad use is collected and thrown by build() as PipelineBuildError; type mismatches
/// between stages are compile-time errors.
template <class T>
class PipelineBuilder {
 public:
  PipelineBuilder() = default;

  /// A source: a range (copied or moved in and iterated anew each epoch),
  /// std::ref(range) (iterated anew each epoch, by reference: it must outlive the
  /// pipeline) or a callable returning std::optional<V> (one pass: a new epoch
  /// continues where the last one stopped); items are numbered 0, 1, … per epoch.
  /// Or a positioned source (a sampler, or std::ref to one): an object whose
  /// `next()` returns std::optional<Positioned<V>>, which numbers its own items.
  template <class S>
  requires detail::RangeSource<S> || detail::NextSource<S> || detail::PositionedSource<S>
  auto add_source(S&& source) && {
    using D = std::decay_t<S>;
    if constexpr (detail::PositionedSource<S>) {
      using Inner = typename detail::UnwrapRef<D>::type;
      using V = decltype(std::declval<Inner&>().next()->value);
      auto holder = std::make_shared<D>(std::forward<S>(source));
      return std::move(*this).template with_source<V>(
          [holder] { return std::make_unique<detail::PositionedCursor<D>>(holder); });
    } else if constexpr (detail::RangeSource<S>) {
      using V =
          std::remove_cvref_t<std::ranges::range_reference_t<typename detail::UnwrapRef<D>::type>>;
      auto holder = std::make_shared<D>(std::forward<S>(source));
      return std::move(*this).template with_source<V>(
          [holder] { return std::make_unique<detail::RangeCursor<D>>(holder); });
    } else {
      using V = typename std::invoke_result_t<D&>::value_type;
      auto next = std::make_shared<D>(std::forward<S>(source));
      return std::move(*this).template with_source<V>(
          [next] { return std::make_unique<detail::NextCursor<D>>(next); });
    }
  }

  /// A map stage: `fn(T) -> U`, or `fn(T) -> std::optional<U>` where an empty optional
  /// filters the item out (counted as filtered). `fn` may take a TaskContext& last
  /// (`fn(T, TaskContext&)`): to see a stop request, or to report failed samples of
  /// its input while its output goes on.
  template <class F>
  auto pipe(F fn, StageOptions options = {}) && {
    static_assert(!std::is_void_v<T>, "pipe(): add a source first");
    static_assert(std::is_invocable_v<F&, T&&> || std::is_invocable_v<F&, T&&, TaskContext&>,
                  "pipe(): the stage function cannot be called with the previous stage's "
                  "output type (as fn(T) or fn(T, TaskContext&))");
    using R = typename detail::StageResult<F, T>::type;
    static_assert(!std::is_void_v<R>,
                  "pipe(): a stage function must return its output (std::optional to filter); "
                  "use generate() to emit several items per input");
    using U = typename detail::UnwrapOptional<R>::type;
    auto f = std::make_shared<F>(std::move(fn));
    detail::StageSpec spec;
    spec.kind = detail::StageKind::pipe;
    spec.options = std::move(options);
    spec.fn = [f](detail::AnyValue& in, std::vector<detail::AnyValue>& out, bool keep,
                  TaskContext& task) {
      detail::with_input<T>(in, keep, [&](T&& arg) {
        if constexpr (detail::IsOptional<R>::value) {
          auto r = detail::call_stage(*f, task, std::move(arg));
          if (r) out.push_back(detail::AnyValue::make(std::move(*r)));
        } else {
          out.push_back(detail::AnyValue::make(detail::call_stage(*f, task, std::move(arg))));
        }
      });
    };
    return std::move(*this).template add_stage<U>(std::move(spec));
  }

  /// A generator stage: `fn(T, Emitter<U>&)` (or `fn(T, Emitter<U>&, TaskContext&)`)
  /// emits zero or more items per input, all carrying the input's positions. U is read
  /// from fn's signature, or given explicitly: `generate<U>(fn)`. Outputs of one input
  /// are delivered together, or none of them if fn throws.
  template <class U = void, class F>
  auto generate(F fn, StageOptions options = {}) && {
    static_assert(!std::is_void_v<T>, "generate(): add a source first");
    using Out = std::conditional_t<std::is_void_v<U>, typename detail::EmitterOf<F>::type, U>;
    static_assert(std::is_invocable_v<F&, T&&, Emitter<Out>&> ||
                      std::is_invocable_v<F&, T&&, Emitter<Out>&, TaskContext&>,
                  "generate(): the function must be callable as fn(T, Emitter<U>&) or "
                  "fn(T, Emitter<U>&, TaskContext&)");
    auto f = std::make_shared<F>(std::move(fn));
    detail::StageSpec spec;
    spec.kind = detail::StageKind::generate;
    spec.options = std::move(options);
    spec.fn = [f](detail::AnyValue& in, std::vector<detail::AnyValue>& out, bool keep,
                  TaskContext& task) {
      detail::with_input<T>(in, keep, [&](T&& arg) {
        Emitter<Out> emit(out);
        detail::call_stage(*f, task, std::move(arg), emit);
      });
    };
    return std::move(*this).template add_stage<Out>(std::move(spec));
  }

  /// Groups n consecutive items into a std::vector<T>; the final partial group is
  /// delivered unless `drop_last` (then its items count as filtered).
  auto aggregate(std::size_t n, AggregateOptions options = {}) && {
    static_assert(!std::is_void_v<T>, "aggregate(): add a source first");
    if (n == 0) spec_.errors.push_back("aggregate(): the batch size must be at least 1");
    auto make = [n, drop_last = options.drop_last]() -> std::unique_ptr<detail::ErasedAggregator> {
      return std::make_unique<detail::VectorAggregator<T>>(n, drop_last);
    };
    return std::move(*this).template add_aggregate<std::vector<T>>(make, n, std::move(options));
  }

  /// A custom aggregator: `accumulate(T) -> std::optional<U>` returns a finished group
  /// when it has one; `flush() -> std::optional<U>` is called at the end of the input.
  /// It is copied afresh for every run. Positions of every item accumulated since the
  /// last output go with the next output.
  template <class A>
  requires requires(A& a, T&& t) {
    a.accumulate(std::move(t));
    a.flush();
  }
  auto aggregate(A aggregator, AggregateOptions options = {}) && {
    using R = decltype(aggregator.accumulate(std::declval<T&&>()));
    static_assert(detail::IsOptional<R>::value,
                  "aggregate(): accumulate() must return std::optional<U>");
    using U = typename R::value_type;
    auto make = [proto = std::make_shared<A>(
                     std::move(aggregator))]() -> std::unique_ptr<detail::ErasedAggregator> {
      return std::make_unique<detail::CustomAggregator<T, A>>(*proto);
    };
    return std::move(*this).template add_aggregate<U>(make, 0, std::move(options));
  }

  /// Flattens a container item into its elements. Element i carries position i of the
  /// container when the counts match (an aggregate undone), else all its positions.
  auto disaggregate(StageOptions options = {}) && {
    static_assert(std::ranges::input_range<T>, "disaggregate(): the item type is not a container");
    using U = std::remove_cvref_t<std::ranges::range_reference_t<T>>;
    detail::StageSpec spec;
    spec.kind = detail::StageKind::disaggregate;
    spec.options = std::move(options);
    spec.fn = [](detail::AnyValue& in, std::vector<detail::AnyValue>& out, bool keep,
                 TaskContext&) {
      detail::with_input<T>(in, keep, [&](T&& container) {
        for (auto& element : container) out.push_back(detail::AnyValue::make(std::move(element)));
      });
    };
    return std::move(*this).template add_stage<U>(std::move(spec));
  }

  /// The sink: a buffer of at most `buffer_size` finished items for the consumer.
  PipelineBuilder add_sink(int buffer_size = 3) && {
    if (spec_.sink_buffer) spec_.errors.push_back("add_sink(): the pipeline already has a sink");
    if (buffer_size < 1) {
      spec_.errors.push_back("add_sink(): buffer_size must be at least 1 (got " +
                             std::to_string(buffer_size) + ")");
    }
    spec_.sink_buffer = std::max(1, buffer_size);
    return std::move(*this);
  }

  /// Checks the pipeline and returns it, not yet started. Throws PipelineBuildError.
  auto build(BuildOptions options = {}) && {
    using Out = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
    if (!spec_.source)
      spec_.errors.insert(spec_.errors.begin(),
                          "build(): the pipeline has no source (call add_source() first)");
    if (!spec_.sink_buffer)
      spec_.errors.push_back("build(): the pipeline has no sink (call add_sink() before build())");
    if (options.num_threads < 0) spec_.errors.push_back("build(): num_threads must be >= 0");
    if (!spec_.errors.empty()) {
      std::string text = spec_.errors.front();
      for (std::size_t i = 1; i < spec_.errors.size(); ++i) text += "; " + spec_.errors[i];
      throw PipelineBuildError(text);
    }
    return Pipeline<Out>(std::make_unique<detail::Engine>(std::move(spec_), std::move(options)));
  }

 private:
  template <class>
  friend class PipelineBuilder;

  template <class V, class Open>
  PipelineBuilder<V> with_source(Open open) && {
    if (spec_.source) spec_.errors.push_back("add_source(): the pipeline already has a source");
    if (!spec_.stages.empty() || spec_.sink_buffer) {
      spec_.errors.push_back("add_source(): the source must come first");
    }
    spec_.source = detail::SourceSpec{std::move(open)};
    PipelineBuilder<V> next;
    next.spec_ = std::move(spec_);
    return next;
  }

  template <class U>
  PipelineBuilder<U> add_stage(detail::StageSpec spec) && {
    auto& o = spec.options;
    if (o.name.empty())
      o.name =
          std::string(detail::kind_name(spec.kind)) + "_" + std::to_string(spec_.stages.size());
    check_stage(spec);
    if (o.retry.attempts < 1) error(o.name, "retry.attempts must be at least 1");
    if (o.retry.attempts > 1 && o.executor != Executor::io) {
      error(o.name, "retry needs executor io (a backoff would block a cpu scheduler thread)");
    }
    if (o.retry.attempts > 1 && !detail::Copyable<T>::value) {
      error(o.name, "retry needs a copyable input type (a failed attempt may have consumed it)");
    }
    spec_.stages.push_back(std::move(spec));
    PipelineBuilder<U> next;
    next.spec_ = std::move(spec_);
    return next;
  }

  template <class U, class Make>
  PipelineBuilder<U> add_aggregate(Make make, std::size_t n, AggregateOptions options) && {
    detail::StageSpec spec;
    spec.kind = detail::StageKind::aggregate;
    spec.options.name =
        options.name.empty() ? "aggregate_" + std::to_string(spec_.stages.size()) : options.name;
    spec.make_aggregator = std::move(make);
    spec.aggregate_size = n;
    check_stage(spec);
    spec_.stages.push_back(std::move(spec));
    PipelineBuilder<U> next;
    next.spec_ = std::move(spec_);
    return next;
  }

  void check_stage(const detail::StageSpec& spec) {
    if (spec_.sink_buffer)
      error(spec.options.name, "a stage after the sink (add_sink() must be last)");
    if (spec.options.concurrency < 1) {
      error(spec.options.name, "concurrency must be at least 1 (got " +
                                   std::to_string(spec.options.concurrency) + ")");
    }
    if (spec.options.queue_capacity < 0) error(spec.options.name, "queue_capacity must be >= 0");
  }

  void error(const std::string& stage, const std::string& what) {
    spec_.errors.push_back("stage '" + stage + "': " + what);
  }

  detail::PipelineSpec spec_;
};

PipelineBuilder()->PipelineBuilder<void>;

/// A built pipeline yielding items of type T. One run is one epoch: iterate it (or
/// call next()) until the end; iterating again (or start()) runs the next epoch.
template <class T>
class Pipeline {
 public:
  using value_type = T;

  explicit Pipeline(std::unique_ptr<detail::Engine> engine) : engine_(std::move(engine)) {}
  Pipeline(Pipeline&&) noexcept = default;
  Pipeline& operator=(Pipeline&&) noexcept = default;
  ~Pipeline() = default;  // the engine's destructor stops a running pipeline

  /// Starts a run (epoch) unless one is active. next() and begin() start one too.
  /// `resume`: the committed state this run continues from (positions it lists are
  /// committed already; a resumed sampler does not yield them again).
  void start(CommitState resume = {}) { engine_->start(std::move(resume)); }
  /// Which source positions of the current (or last) run are committed, consistent
  /// with exactly the items the consumer has taken (call it from the consumer thread).
  CommitState committed() const { return engine_->committed(); }
  /// Stops the active run: queued work is dropped, running tasks finish their current
  /// item, every actor and thread of the run is joined. Safe to call at any point.
  void stop() { engine_->stop(); }
  bool running() const { return engine_->running(); }
  /// Replaces BuildOptions::max_failures from the next run on; the counts it judges
  /// stay those of the pipeline's whole life. Between runs only (std::logic_error).
  void set_failure_budget(FailureBudget budget) { engine_->set_failure_budget(std::move(budget)); }

  /// The next item; `timeout` unset waits as long as it takes. Throws PipelineFailure
  /// once if the run failed. After `end`, the next call starts a new epoch.
  NextResult<T> next(std::optional<std::chrono::nanoseconds> timeout = std::nullopt) {
    detail::Item item;
    NextResult<T> r;
    r.status = engine_->next(item, timeout);
    if (r.status == NextStatus::item) {
      r.item.emplace(std::move(item.value.get<T>()));
      r.positions = std::move(item.positions);
    }
    return r;
  }

  /// Statistics of the current (or last) run; see StageStats.
  PipelineStats stats() const { return engine_->stats(); }
  /// The memory bound of the header comment, in source items.
  std::size_t item_bound() const { return engine_->item_bound(); }

  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    T& operator*() const { return *current_->item; }
    T* operator->() const { return &*current_->item; }
    const Positions& positions() const { return current_->positions; }
    iterator& operator++() {
      current_->item.reset();  // release the consumed item before taking the next
      *current_ = owner_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) {
      return !it.current_ || it.current_->status != NextStatus::item;
    }

   private:
    friend class Pipeline;
    Pipeline* owner_ = nullptr;
    std::shared_ptr<NextResult<T>> current_;
  };

  /// Starts a run (the next epoch if the last one ended) and returns its first item.
  iterator begin() {
    iterator it;
    it.owner_ = this;
    it.current_ = std::make_shared<NextResult<T>>(next());
    return it;
  }
  std::default_sentinel_t end() { return {}; }

 private:
  std::unique_ptr<detail::Engine> engine_;
};

}  // namespace brigade::actors
