from kv_report import KeyValueStore, generate_report


def test_set_get_and_exists():
    store = KeyValueStore()
    store.set("a", "1")
    assert store.get("a") == "1" and store.exists("a") and store.get("b", "no") == "no"


def test_delete():
    store = KeyValueStore()
    store.set("a", "1")
    assert store.delete("a") is True and store.delete("a") is False


def test_list_keys_and_prefix():
    store = KeyValueStore()
    for key in ("b:2", "a:1", "b:1"):
        store.set(key, key)
    assert store.list_keys() == ["a:1", "b:1", "b:2"]
    assert store.filter_by_prefix("b:") == {"b:2": "b:2", "b:1": "b:1"}


def test_json_round_trip(tmp_path):
    store = KeyValueStore()
    store.set("k", "v")
    store.export_to_json(tmp_path / "s.json")
    other = KeyValueStore()
    other.load_from_json(tmp_path / "s.json")
    assert other.list_keys() == ["k"] and other.get("k") == "v"


def test_generate_report():
    store = KeyValueStore()
    store.set("user:1", "")
    store.set("user:2", "bob")
    store.set("plain", "x")
    assert generate_report(store) == {
        "total_keys": 3,
        "empty_values": 1,
        "prefix_counts": {"user": 2},
        "largest_value_length": 3,
    }
