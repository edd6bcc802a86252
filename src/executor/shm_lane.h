// ShmLane: the driver <-> worker connection's fast path on one host. Two one-message mailboxes
// (one each way) in a shared-memory segment: the sender copies a message in and publishes it by
// bumping a counter; the receiver spins on that counter, then sleeps on it (futex), so a step's
// message and reply cross without a system call. TCP stays for everything else: the set-up, what
// does not fit, and the end of stream that tells a peer died (executor/connection.h).
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "distributed/shm_segment.h"
#include "executor/connection.h"

namespace gs {

class ShmLane {
 public:
  // Bytes of one message's payload: a decode step takes ~50 B a request plus 4 B a KV block of its
  // context (256 requests at 16k tokens: ~1 MiB); a larger one goes over TCP. The segment is
  // sparse: only the pages messages touch take memory.
  static constexpr size_t kCapacity = size_t(4) << 20;

  // side 0 (the driver) creates the segment `name`; side 1 (the worker) maps it, waiting up to
  // timeout_s for it (throws gs::Error when it cannot: another host).
  ShmLane(const std::string& name, int side, double timeout_s = 1.0);
  static std::string make_name();
  const std::string& name() const { return name_; }
  // Removes the segment's name once both sides mapped it (the mappings stay).
  void unlink_name() { seg_.unlink_name(); }

  // Copies a message into the outgoing mailbox; false (nothing posted) when it does not fit or
  // the previous message was not taken yet.
  bool post(MsgType type, const std::string& payload);
  // The incoming message, once posted.
  std::optional<Message> take();
  bool has_message() const;
  // Sleeps until a message may have been posted, at most ms milliseconds.
  void sleep(int ms);

 private:
  struct Mailbox {
    std::atomic<uint32_t> posted;    // messages posted (the futex word)
    std::atomic<uint32_t> sleeping;  // the receiver sleeps on `posted`
    std::atomic<uint32_t> taken;     // messages the receiver took
    uint32_t type;
    uint64_t size;
  };
  static constexpr size_t kHeaderBytes = 64;
  static uint8_t* data(Mailbox* m) { return reinterpret_cast<uint8_t*>(m) + kHeaderBytes; }

  std::string name_;
  ShmSegment seg_;
  Mailbox* out_;
  Mailbox* in_;
};

}  // namespace gs
