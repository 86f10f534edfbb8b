#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace brigade::actors::detail {

/// A move-only, type-erased value: the payload of an item between stages.
///
/// Small trivially copyable values (ints, pointers, small PODs) are stored inline;
/// everything else lives in one heap allocation that is moved by pointer, so moving
/// an AnyValue never moves (or counts) a payload object. The builder fixes every
/// stage's types at compile time; `get<T>` still checks the type (one pointer compare)
/// and throws std::logic_error on a mismatch rather than misbehaving.
class AnyValue {
 public:
  AnyValue() = default;
  AnyValue(AnyValue&& other) noexcept { steal(other); }
  AnyValue& operator=(AnyValue&& other) noexcept {
    if (this != &other) {
      reset();
      steal(other);
    }
    return *this;
  }
  AnyValue(const AnyValue&) = delete;
  AnyValue& operator=(const AnyValue&) = delete;
  ~AnyValue() { reset(); }

  template <class T, class U = std::decay_t<T>>
  static AnyValue make(T&& value) {
    AnyValue v;
    v.type_ = type_tag<U>();
    if constexpr (kInline<U>) {
      ::new (static_cast<void*>(v.inline_)) U(std::forward<T>(value));
    } else {
      v.heap_ = std::make_unique<U>(std::forward<T>(value)).release();
      v.destroy_ = [](void* p) { delete static_cast<U*>(p); };  // owner of the make_unique above
    }
    return v;
  }

  bool has_value() const { return type_ != nullptr; }

  template <class T>
  T& get() {
    if (type_ != type_tag<T>()) throw std::logic_error("brigade: item holds another type");
    if constexpr (kInline<T>) {
      return *std::launder(reinterpret_cast<T*>(inline_));
    } else {
      return *static_cast<T*>(heap_);
    }
  }

  void reset() {
    if (destroy_ != nullptr) destroy_(heap_);
    destroy_ = nullptr;
    heap_ = nullptr;
    type_ = nullptr;
  }

 private:
  template <class T>
  static constexpr bool kInline = std::is_trivially_copyable_v<T> && sizeof(T) <= 16 &&
                                  alignof(T) <= alignof(std::max_align_t);

  template <class T>
  static const void* type_tag() {
    static const char tag = 0;
    return &tag;
  }

  void steal(AnyValue& other) noexcept {
    type_ = other.type_;
    heap_ = other.heap_;
    destroy_ = other.destroy_;
    std::memcpy(inline_, other.inline_, sizeof(inline_));
    other.type_ = nullptr;
    other.heap_ = nullptr;
    other.destroy_ = nullptr;
  }

  const void* type_ = nullptr;
  void* heap_ = nullptr;
  void (*destroy_)(void*) = nullptr;
  alignas(std::max_align_t) unsigned char inline_[16] = {};
};

}  // namespace brigade::actors::detail
