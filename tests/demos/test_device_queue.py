import threading

import pytest

from demos.device import DeviceQueue, detect_device
from memory.config import ConfigError
from tests.runtime.conftest import wait_for


def test_detect_device_cpu():
    info = detect_device("cpu")
    assert info.kind == "cpu" and info.cores >= 1
    assert "CPU" in info.label()
    with pytest.raises(ConfigError):
        detect_device("tpu")


def test_queue_serves_in_arrival_order_and_reports_waiting():
    queue = DeviceQueue(poll_seconds=0.01)
    order, waits = [], {}
    release = threading.Event()

    def worker(name):
        def on_wait(ahead):
            waits.setdefault(name, []).append(ahead)

        with queue.turn(on_wait):
            order.append(name)
            if name == 0:
                assert release.wait(60)

    threads = []
    for name in range(4):
        t = threading.Thread(target=worker, args=(name,))
        t.start()
        threads.append(t)
        # arrive in order: the next starts once this one is queued (a fixed 0.05 s pause
        # let a thread started late on a busy machine arrive after the next one)
        wait_for(lambda: queue.waiting() == len(threads), timeout=30)
    assert queue.waiting() == 4
    release.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert order == [0, 1, 2, 3]
    assert waits[3][0] == 3 and 0 not in waits
    assert queue.waiting() == 0


def test_a_caller_that_gives_up_does_not_block_the_queue():
    queue = DeviceQueue(poll_seconds=0.01)
    hold = threading.Event()

    def holder():
        with queue.turn():
            assert hold.wait(60)

    t = threading.Thread(target=holder)
    t.start()
    wait_for(lambda: queue.waiting() == 1, timeout=30)  # the holder has its turn

    def give_up(ahead):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), queue.turn(give_up):
        pass
    assert queue.waiting() == 1
    hold.set()
    t.join(30)
    assert not t.is_alive()
    with queue.turn():
        assert queue.waiting() == 1
