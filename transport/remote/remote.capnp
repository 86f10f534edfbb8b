@0xc4a1d3e5f7092b61;

# Messages between trainers, remote workers and the directory (transport/remote/remote.h):
# the protocol alone. Each travels as the bytes of one CAF message field
# (std::vector<char>), beside atoms that say what it is. Stable within one protocol
# version (kProtocolVersion); a peer of another version is refused in the hello, naming
# both versions. An operation's task and result are its own schema's bytes, carried
# without being read (the decode operation's: launch/loader/decode_op.capnp).

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
  rank @7 :Int64 = -1;        # the trainer's rank (its weight: RankWeights); -1: none
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

# Directory → worker (rank 0's rebalancing): each rank's weight in the worker's turn among
# sessions (transport/remote/remote.h SESSIONS AND FAIRNESS). Sent on each change and to
# each worker that joins.
struct RankWeights {
  token @0 :Data;             # the job token's digest (compared in constant time)
  weights @1 :List(UInt32);   # by rank; a rank past the list weighs kNeutralWeight
}
