import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _single_threaded():
    """Tiny models run fastest on one thread, and the test machine is shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
