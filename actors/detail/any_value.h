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
/// Values of up to 32 bytes whose move constructor does not throw (ints, small PODs,
/// std::vector, std::string, shared_ptr, unique_ptr, small handles) are stored inline
/// and moved with their own move constructor; anything else lives in one heap
/// allocation that is moved by pointer. An item crosses four or more AnyValues on its
/// way through a pipeline, so a heap allocation per AnyValue was a malloc and a free
/// per item per stage (a tenth of the engine's time on no-op stages). The builder fixes
/// every stage's types at compile time; `get<T>` still checks the type (one pointer
/// compare) and throws std::logic_error on a mismatch rather than misbehaving.
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
    if constexpr (kInline<U>) {
      ::new (static_cast<void*>(v.storage_)) U(std::forward<T>(value));
    } else {
      U* heap = std::make_unique<U>(std::forward<T>(value)).release();  // owned by kOps<U>
      std::memcpy(v.storage_, &heap, sizeof(heap));
    }
    v.type_ = type_tag<U>();
    v.ops_ = ops_of<U>();
    return v;
  }

  bool has_value() const { return type_ != nullptr; }

  template <class T>
  T& get() {
    if (type_ != type_tag<T>()) throw std::logic_error("brigade: item holds another type");
    if constexpr (kInline<T>) {
      return *std::launder(reinterpret_cast<T*>(storage_));
    } else {
      return *heap<T>(storage_);
    }
  }

  void reset() {
    if (ops_ != nullptr) ops_->destroy(storage_);
    ops_ = nullptr;
    type_ = nullptr;
  }

 private:
  static constexpr std::size_t kInlineSize = 32;

  template <class T>
  static constexpr bool kInline =
      sizeof(T) <= kInlineSize &&
      alignof(T) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<T>;

  // How to move (into raw storage, leaving the source destroyed) and destroy a value;
  // none for inline trivially copyable values, which are copied bytewise.
  struct Ops {
    void (*move)(void* to, void* from) noexcept;
    void (*destroy)(void* storage) noexcept;
  };

  template <class T>
  static T* heap(const void* storage) {
    T* p = nullptr;
    std::memcpy(&p, storage, sizeof(p));
    return p;
  }

  template <class T>
  static const Ops* ops_of() {
    if constexpr (kInline<T> && std::is_trivially_copyable_v<T>) {
      return nullptr;
    } else if constexpr (kInline<T>) {
      static constexpr Ops ops{
          [](void* to, void* from) noexcept {
            T* source = std::launder(reinterpret_cast<T*>(from));
            ::new (to) T(std::move(*source));
            source->~T();
          },
          [](void* storage) noexcept { std::launder(reinterpret_cast<T*>(storage))->~T(); }};
      return &ops;
    } else {
      static constexpr Ops ops{
          [](void* to, void* from) noexcept { std::memcpy(to, from, sizeof(T*)); },
          [](void* storage) noexcept { std::unique_ptr<T>{heap<T>(storage)}; }};
      return &ops;
    }
  }

  template <class T>
  static const void* type_tag() {
    static const char tag = 0;
    return &tag;
  }

  void steal(AnyValue& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->move(storage_, other.storage_);
    } else {
      std::memcpy(storage_, other.storage_, sizeof(storage_));
    }
    type_ = other.type_;
    ops_ = other.ops_;
    other.type_ = nullptr;
    other.ops_ = nullptr;
  }

  const void* type_ = nullptr;
  const Ops* ops_ = nullptr;
  alignas(std::max_align_t) unsigned char storage_[kInlineSize] = {};
};

}  // namespace brigade::actors::detail
