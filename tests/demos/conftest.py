import pytest
import torch

from demos.measure import warm_up


@pytest.fixture(scope="session", autouse=True)
def _warm_and_single_threaded():
    """Tiny test models run fastest on one thread, and the CI machine is shared."""
    warm_up()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
