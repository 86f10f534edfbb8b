# Checkpoint files of the samplers: one file per rank, `rank-<R>-of-<W>.ckpt`.
#
# STABILITY. This schema is a stable on-disk format. Fields may be added at the end
# of a struct (with a new ordinal); existing ordinals, types and enum values never
# change. A change in meaning bumps RankState.formatVersion (see SamplerState in
# actors/sampler.h), which readers check.
#
# LAYOUT. A file is one unpacked Cap'n Proto message (standard segment table framing)
# whose root is CheckpointFile. Its `payload` holds a second message (root RankState),
# and `crc32` is the CRC-32 (zlib polynomial) of those payload bytes: Cap'n Proto
# itself accepts a flipped byte inside a field, the checksum does not.

@0xf24178d7ae8fe23d;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::transport::schema");

struct CheckpointFile {
  magic @0 :UInt64;      # 0x54504b4347495242 ("BRIGCKPT" little-endian)
  crc32 @1 :UInt32;      # of payload
  payload @2 :Data;      # a message whose root is RankState
  fileVersion @3 :UInt32;  # of this envelope: 1 (also fills the data word, so that
                           # no byte of the file is unchecked padding)
}

enum TailPolicy {
  none @0;
  dropLast @1;
  pad @2;
}

enum SamplerKind {
  deterministic @0;
  random @1;
  weighted @2;
}

struct DatasetFingerprint {
  n @0 :UInt64;
  identityHash @1 :UInt64;
  kind @2 :SamplerKind;
  seed @3 :UInt64;
  numDraws @4 :UInt64;
  weightsHash @5 :UInt64;
  tail @6 :TailPolicy;
}

# Global epoch positions start, start + stride, … (count of them).
struct PositionRun {
  start @0 :UInt64;
  stride @1 :UInt64;
  count @2 :UInt64;
}

struct RankState {
  formatVersion @0 :UInt32;
  generation @1 :UInt64;
  fingerprint @2 :DatasetFingerprint;
  epoch @3 :UInt64;
  epochLength @4 :UInt64;
  worldSize @5 :UInt32;
  rank @6 :UInt32;
  owned @7 :List(PositionRun);       # this rank's positions, in its local order
  committedWatermark @8 :UInt64;     # local positions below it are committed
  committedAbove @9 :List(UInt64);   # and these (sorted, above the watermark)
}
