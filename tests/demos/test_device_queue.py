import threading
import time

import pytest

from demos.engine.device import DeviceQueue, detect_device
from memory.config import ConfigError


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
                release.wait(5)

    threads = []
    for name in range(4):
        t = threading.Thread(target=worker, args=(name,))
        t.start()
        threads.append(t)
        time.sleep(0.05)  # arrive in order
    assert queue.waiting() == 4
    release.set()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]
    assert waits[3][0] == 3 and 0 not in waits
    assert queue.waiting() == 0


def test_a_caller_that_gives_up_does_not_block_the_queue():
    queue = DeviceQueue(poll_seconds=0.01)
    hold = threading.Event()

    def holder():
        with queue.turn():
            hold.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    time.sleep(0.05)

    def give_up(ahead):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), queue.turn(give_up):
        pass
    assert queue.waiting() == 1
    hold.set()
    t.join(5)
    with queue.turn():
        assert queue.waiting() == 1
