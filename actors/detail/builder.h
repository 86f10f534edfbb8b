#pragma once

// Type plumbing behind actors/pipeline.h: traits that classify sources and stage
// functions, the source cursors, the erased aggregators. Included only by
// pipeline.h; nothing here is part of the API.

#include <algorithm>
#include <concepts>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/detail/spec.h"
#include "actors/positions.h"
#include "actors/task.h"

namespace brigade::actors {

template <class U>
class Emitter;

namespace detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
struct UnwrapOptional {
  using type = T;
};
template <class T>
struct UnwrapOptional<std::optional<T>> {
  using type = T;
};

template <class T>
struct UnwrapRef {
  using type = T;
};
template <class T>
struct UnwrapRef<std::reference_wrapper<T>> {
  using type = T;
};

// Whether a copy of T really compiles: std::vector<MoveOnly> declares a copy
// constructor that fails only when instantiated. Used for retries, which copy inputs.
template <class T>
struct Copyable : std::is_copy_constructible<T> {};
template <class T, class A>
struct Copyable<std::vector<T, A>> : Copyable<T> {};
template <class T>
struct Copyable<std::optional<T>> : Copyable<T> {};
template <class A, class B>
struct Copyable<std::pair<A, B>> : std::conjunction<Copyable<A>, Copyable<B>> {};

template <class S>
concept RangeSource = std::ranges::input_range<typename UnwrapRef<std::decay_t<S>>::type>;

template <class T>
struct IsPositioned : std::false_type {};
template <class T>
struct IsPositioned<Positioned<T>> : std::true_type {};

template <class S>
concept PositionedSource = requires(typename UnwrapRef<std::decay_t<S>>::type& s) {
  {s.next()};
  requires IsOptional<std::decay_t<decltype(s.next())>>::value;
  requires IsPositioned<typename std::decay_t<decltype(s.next())>::value_type>::value;
};

template <class S>
concept NextSource = !RangeSource<S> && !PositionedSource<S> && std::invocable<std::decay_t<S>&> &&
                     IsOptional<std::invoke_result_t<std::decay_t<S>&>>::value;

// The U of a generate() function `void(T, Emitter<U>&)`, read from its signature.
template <class F>
struct EmitterOf : EmitterOf<decltype(&F::operator())> {};
template <class C, class R, class A, class U>
struct EmitterOf<R (C::*)(A, Emitter<U>&) const> {
  using type = U;
};
template <class C, class R, class A, class U>
struct EmitterOf<R (C::*)(A, Emitter<U>&)> {
  using type = U;
};
template <class R, class A, class U>
struct EmitterOf<R (*)(A, Emitter<U>&)> {
  using type = U;
};
template <class C, class R, class A, class U>
struct EmitterOf<R (C::*)(A, Emitter<U>&, TaskContext&) const> {
  using type = U;
};
template <class C, class R, class A, class U>
struct EmitterOf<R (C::*)(A, Emitter<U>&, TaskContext&)> {
  using type = U;
};
template <class R, class A, class U>
struct EmitterOf<R (*)(A, Emitter<U>&, TaskContext&)> {
  using type = U;
};

template <class R>
class RangeCursor final : public SourceCursor {
 public:
  explicit RangeCursor(std::shared_ptr<R> holder)
      : holder_(std::move(holder)),
        it_(std::ranges::begin(range())),
        end_(std::ranges::end(range())) {}
  bool next(AnyValue& value, std::uint64_t&) override {
    if (it_ == end_) return false;
    value = AnyValue::make(*it_);
    ++it_;
    return true;
  }

 private:
  auto& range() {
    if constexpr (IsRefWrapper)
      return holder_->get();
    else
      return *holder_;
  }
  static constexpr bool IsRefWrapper = !std::is_same_v<typename UnwrapRef<R>::type, R>;
  using Inner = typename UnwrapRef<R>::type;
  std::shared_ptr<R> holder_;
  std::ranges::iterator_t<Inner> it_;
  std::ranges::sentinel_t<Inner> end_;
};

template <class S>
class PositionedCursor final : public SourceCursor {
 public:
  explicit PositionedCursor(std::shared_ptr<S> source) : source_(std::move(source)) {}
  bool next(AnyValue& value, std::uint64_t& position) override {
    auto& s = [this]() -> auto& {
      if constexpr (std::is_same_v<typename UnwrapRef<S>::type, S>)
        return *source_;
      else
        return source_->get();
    }
    ();
    auto v = s.next();
    if (!v) return false;
    position = v->position;
    value = AnyValue::make(std::move(v->value));
    return true;
  }

 private:
  std::shared_ptr<S> source_;
};

template <class G>
class NextCursor final : public SourceCursor {
 public:
  explicit NextCursor(std::shared_ptr<G> next) : next_(std::move(next)) {}
  bool next(AnyValue& value, std::uint64_t&) override {
    auto v = (*next_)();
    if (!v) return false;
    value = AnyValue::make(std::move(*v));
    return true;
  }

 private:
  std::shared_ptr<G> next_;
};

// Calls `call` with the item's value moved out, or with a copy when `keep` (a retried
// task must find its input intact for the next attempt).
template <class T, class Fn>
void with_input(AnyValue& in, bool keep, Fn&& call) {
  if (keep) {
    if constexpr (Copyable<T>::value) {
      T copy = in.get<T>();
      call(std::move(copy));
      return;
    } else {
      throw std::logic_error("retry needs a copyable input type");
    }
  }
  call(std::move(in.get<T>()));
}

// Calls a stage function with or without the TaskContext it may take last.
template <class F, class... A>
decltype(auto) call_stage(F& f, TaskContext& task, A&&... args) {
  if constexpr (std::is_invocable_v<F&, A&&..., TaskContext&>) {
    return f(std::forward<A>(args)..., task);
  } else {
    return f(std::forward<A>(args)...);
  }
}

template <class F, class T>
struct StageResult {
  using type = typename std::conditional_t<std::is_invocable_v<F&, T&&, TaskContext&>,
                                           std::invoke_result<F&, T&&, TaskContext&>,
                                           std::invoke_result<F&, T&&>>::type;
};

template <class T>
struct VectorAggregator final : ErasedAggregator {
  // Reserves at most kReserve up front: a batch size far above the items that exist
  // must not allocate for items that never come.
  static constexpr std::size_t kReserve = 1024;
  VectorAggregator(std::size_t n, bool drop) : size(n), drop_last(drop) {
    batch.reserve(std::min(n, kReserve));
  }
  std::optional<AnyValue> accumulate(AnyValue&& v) override {
    batch.push_back(std::move(v.get<T>()));
    if (batch.size() < size) return std::nullopt;
    auto full = AnyValue::make(std::move(batch));
    batch = std::vector<T>();
    batch.reserve(std::min(size, kReserve));
    return full;
  }
  std::optional<AnyValue> flush() override {
    if (batch.empty() || drop_last) return std::nullopt;
    return AnyValue::make(std::move(batch));
  }
  std::size_t size;
  bool drop_last;
  std::vector<T> batch;
};

template <class T, class A>
struct CustomAggregator final : ErasedAggregator {
  explicit CustomAggregator(A a) : agg(std::move(a)) {}
  std::optional<AnyValue> accumulate(AnyValue&& v) override {
    auto r = agg.accumulate(std::move(v.get<T>()));
    if (!r) return std::nullopt;
    return AnyValue::make(std::move(*r));
  }
  std::optional<AnyValue> flush() override {
    auto r = agg.flush();
    if (!r) return std::nullopt;
    return AnyValue::make(std::move(*r));
  }
  A agg;
};

}  // namespace detail

}  // namespace brigade::actors
