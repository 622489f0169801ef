"""Read a YAML file strictly: syntax errors and duplicate keys are one-line
ConfigErrors with the line number, never tracebacks."""

import yaml

from ..errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one
    silently, which hides typos such as two `size:` lines)."""


_MERGE = "tag:yaml.org,2002:merge"


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        # `<<: *base` merges another mapping (keys written here override
        # it): only the keys written here must be unique
        if key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(None, f"line {key_node.start_mark.line + 1}: duplicate key {key!r}",
                              "each key may appear once per mapping")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """_StrictLoader on libyaml's parser (several times faster: every build
    reads the bundled targets). It builds the same values; a file it
    refuses is parsed again by _StrictLoader, whose messages say why."""


_FastStrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# a target or model YAML is a few kB; a bigger file is the wrong path
MAX_YAML_BYTES = 1 << 20


def decode_text(raw, path):
    """UTF-8 text (a BOM allowed); anything else is one line naming the file."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(path, "the file is UTF-16 text", "save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(path, f"not UTF-8 text (byte {err.start} is 0x{raw[err.start]:02x})",
                          "save it as UTF-8") from None


def load_yaml(path):
    """Parse `path`; return its top-level mapping."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as err:
        raise ConfigError(path, f"cannot read file: {err.strerror}",
                          "check the path, and that you may read it (chmod)") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(path, f"larger than {MAX_YAML_BYTES} bytes: not a target or model YAML",
                          "give the path of the YAML file")
    text = decode_text(raw, path)
    data = None
    # libyaml lets some characters through that PyYAML's reader refuses
    if not yaml.reader.Reader.NON_PRINTABLE.search(text):
        try:
            data = yaml.load(text, Loader=_FastStrictLoader)
        except Exception:  # noqa: BLE001  (any refusal: the pure parser below says why, as it always did)
            data = None
    try:
        if data is None:
            data = yaml.load(text, Loader=_StrictLoader)
    except ConfigError as err:
        raise ConfigError(path, err.what, err.fix) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(path, f"{where}invalid YAML: {problem}",
                          "fix the syntax (indentation, colons, quotes)") from None
    if not isinstance(data, dict):
        raise ConfigError(path, "expected a mapping of keys at the top level",
                          "see targets/host.yaml or models/tiny.yaml for the format")
    return data
