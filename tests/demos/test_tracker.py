import torch

from demos.tracker import LiveTracker


def test_tracker_matches_a_hand_built_case_exactly():
    param = torch.ones(50)  # exists before: never counted, nor are views of it
    tracker = LiveTracker("cpu", timeline=True)
    tracker.ignore([param])
    with tracker:
        a = torch.ones(1000)  # +4000
        b = a * 2  # +4000 -> 8000
        c = b.view(10, 100)  # a view: no new storage
        d = param.view(5, 10)  # a view of an ignored storage
        del a  # -4000 -> 4000
        e = torch.empty(250, dtype=torch.float64)  # +2000 -> 6000
        f = c.sum()  # +4 -> 6004
        del b, c  # c was the last reference to b's storage: -4000 -> 2004
        g = torch.zeros(3, dtype=torch.int8)  # +3 -> 2007
    assert tracker.peak_bytes == 8000
    assert tracker.live_bytes == 2007
    lives = [p.live_bytes for p in tracker.points]
    assert lives == [4000, 8000, 8000, 8000, 6000, 6004, 2007]
    assert [p.op for p in tracker.points][:2] == ["ones.default", "mul.Tensor"]
    del d, e, f, g
    assert tracker.live_bytes == 0


def test_tracker_counts_shared_storage_once_and_attributes_gradients():
    tracker = LiveTracker("cpu")
    with tracker:
        x = torch.randn(100, requires_grad=True)  # leaf made inside: counted (400)
        y = x.exp()  # saved for backward (400)
        tracker.start_backward()
        # sum (4), its unit gradient (4), the expand to y's shape (a view, 0 bytes), and
        # grad * exp(x) (400), which becomes x.grad
        y.sum().backward()
        tracker.mark_gradient(x.grad)
    assert tracker.by_category["gradients"] == 400
    assert tracker.peak_bytes == 400 + 400 + 4 + 4 + 400
    assert tracker.live_bytes == 400 + 400 + 400  # x, y, x.grad; the scalars are gone
