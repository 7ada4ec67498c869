"""The client-side link impairment: loss, duplication, reordering and delay, in proportion."""
import pytest

from exo_harness.impair import ImpairedIO, Impairment


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class LinkIO:
    mac, ip, port = b"\x02" * 6, b"\x0a\x00\x00\x01", 1

    def __init__(self, clock):
        self.sent = []
        self.inbox = []
        self.clock = clock

    def send(self, frame):
        self.sent.append(frame)

    def recv(self, timeout):
        self.clock.t += timeout  # time passes while we wait
        return self.inbox.pop(0) if self.inbox else None

    def close(self):
        pass


def run(imp, n=4000, seed=1):
    clock = Clock()
    link = LinkIO(clock)
    io = ImpairedIO(link, imp, seed=seed, clock=clock)
    for i in range(n):
        io.send(i.to_bytes(4, "big"))
        clock.t += 0.0001
    io.recv(1.0)  # lets every delayed frame leave
    return io, [int.from_bytes(f, "big") for f in link.sent]


def test_no_impairment_passes_everything_in_order():
    _, got = run(Impairment())
    assert got == list(range(4000))


def test_loss_and_duplication_rates():
    io, got = run(Impairment(loss=0.05, duplicate=0.05))
    assert 0.03 < io.stats["tx_lost"] / 4000 < 0.08
    assert 0.03 < io.stats["tx_duplicated"] / 4000 < 0.07
    assert len(got) != len(set(got))  # some frames arrive twice


def test_delay_with_reorder_changes_the_order():
    io, got = run(Impairment(delay_s=0.002, jitter_s=0.001, reorder=0.2))
    assert sorted(got) == list(range(4000))
    assert got != sorted(got) and io.stats["tx_reordered"] > 0


def test_received_replies_can_be_lost_or_duplicated():
    clock = Clock()
    link = LinkIO(clock)
    io = ImpairedIO(link, Impairment(duplicate=1.0), seed=3, clock=clock)
    link.inbox.append(b"reply")
    assert io.recv(0.1) == b"reply" and io.recv(0.1) == b"reply" and io.recv(0.1) is None


def test_bad_probability_refused():
    with pytest.raises(ValueError, match="loss"):
        Impairment(loss=1.5)
