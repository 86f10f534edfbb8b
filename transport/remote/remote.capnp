@0xc4a1d3e5f7092b61;

# Messages between trainers, remote decode workers and the directory (transport/remote/remote.h).
# Each travels as the bytes of one CAF message field (std::vector<char>), beside atoms
# that say what it is. Stable within one protocol version (kProtocolVersion); a peer of
# another version is refused in the hello, naming both versions.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::transport::wire");

struct OpVersion {
  name @0 :Text;
  version @1 :UInt32;
}

# Trainer → worker gate: the first message of a session.
struct Hello {
  protocol @0 :UInt32;
  buildId @1 :Text;
  token @2 :Data;             # the job token (compared in constant time)
  ops @3 :List(OpVersion);    # operations the trainer will call
  fingerprint @4 :UInt64;     # the dataset's; 0: none
  trainerKey @5 :Data;        # the key the worker puts in every message to this trainer
  name @6 :Text;              # the trainer, for logs ("rank 1 on host, pid 42")
}

# Worker gate → trainer: the session is open.
struct Welcome {
  protocol @0 :UInt32;
  buildId @1 :Text;
  sessionKey @2 :Data;        # the key the trainer puts in every later message
  window @3 :UInt32;          # tasks the trainer may have outstanding on this worker
  threads @4 :UInt32;
  name @5 :Text;              # the worker, for logs and statistics ("host:port")
}

# Worker → directory.
struct Join {
  token @0 :Data;
  endpoint @1 :Text;          # where trainers reach the worker ("host:port")
}

# Trainer → directory.
struct Subscribe {
  token @0 :Data;
  name @1 :Text;
}

# Directory → subscriber: every worker that is there now (sent on subscribe and on each
# change).
struct WorkerList {
  directoryKey @0 :Data;      # given in the first list; every later list carries it
  endpoints @1 :List(Text);
}

# The built-in decode operations' task and result (launch/loader/remote_ops.h).
struct DecodeTask {
  kind @0 :UInt8;             # 0 image, 1 video
  layout @1 :UInt8;           # 0 nhwc, 1 nchw
  side @2 :UInt32;
  clipFrames @3 :UInt32;
  seed @4 :UInt64;
  epoch @5 :UInt64;
  samples @6 :List(TaskSample);
  # The image transform (media/transform.h) and its parameters; since
  # brigade.decode.images version 2 (version 1 workers would ignore them).
  transform @7 :UInt8;        # 0 eval, 1 train, 2 none; clips: 0 or 1
  resize @8 :UInt32;          # eval: the shorter side before the crop
  scaleMin @9 :Float64;       # train: area fraction range
  scaleMax @10 :Float64;
  ratioMin @11 :Float64;      # train: aspect ratio range
  ratioMax @12 :Float64;
  flipProbability @13 :Float64;
  exifOrientation @14 :Bool;
  # Since brigade.decode.clips version 2: clips take eval or train.
  clipStride @15 :UInt32;     # clips, train: frames between the selected frames
  roiDecode @16 :Bool = true; # JPEG: region-of-interest decode (media/transform.h)
}

struct TaskSample {
  id @0 :UInt64;
  path @1 :Text;
}

struct SampleFailure {
  index @0 :UInt32;           # in the task's samples
  id @1 :UInt64;
  message @2 :Text;
  category @3 :Text;          # std::error_category::name(), "" for none
  code @4 :Int32;
}

struct DecodeResult {
  ids @0 :List(UInt64);       # ids[i] is the sample in data's row i
  shape @1 :List(Int64);      # [ids.size(), ...sample shape]
  data @2 :Data;              # uint8, C order
  failures @3 :List(SampleFailure);
}
