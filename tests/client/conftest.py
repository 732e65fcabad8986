import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]
