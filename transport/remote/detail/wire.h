#pragma once

// The remote protocol's Cap'n Proto bytes (transport/remote/remote.capnp): the wire room's
// reader and writer (transport/wire/wire.h) with RemoteError for malformed bytes.

#include <utility>

#include "transport/remote/remote.h"
#include "transport/wire/wire.h"

namespace brigade::transport::detail {

using wire::as_data;
using wire::kMaxMessageBytes;
using wire::to_bytes;
using wire::to_string;

/// Reads bytes a peer sent; throws RemoteError for malformed ones (wire::Reader).
using WireReader = wire::Reader<RemoteError>;

/// Calls `fn` (reading a message's fields); a malformed message's kj::Exception becomes
/// RemoteError.
template <class F>
auto checked_read(F&& fn) -> decltype(fn()) {
  return wire::checked_read<RemoteError>(std::forward<F>(fn));
}

}  // namespace brigade::transport::detail
