"""Loaders for the raw data files of the paper's experiments (UCI Abalone, UCI Adult, MNIST).

No data ship with privbayes. Every loader looks for its files, in this order, in

1. ``data_dir`` (the experiments' ``--data-dir``),
2. the directory named by the environment variable ``PRIVBAYES_DATA``,
3. ``../shared/data`` next to the repository root,

each as ``DIR/<dataset>/<file>`` (the layout of ``data/README.md``) or ``DIR/<file>``. A
missing file raises :class:`FileNotFoundError` that lists every place looked and says where
to get the file. Parsers read the original formats and raise :class:`ValueError` naming the
file and line (or byte count) when a file is malformed.

Category lists are the public codebooks of the data sets (``adult.names``), so one-hot
encodings do not depend on which records happen to be present.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "ADULT_CATEGORICAL",
    "ADULT_NUMERIC",
    "ABALONE_MEASUREMENTS",
    "Abalone",
    "Adult",
    "DATA_ENV",
    "DEFAULT_DATA_DIR",
    "data_dirs",
    "find_data_file",
    "load_abalone",
    "load_adult",
    "load_mnist",
    "one_hot",
    "parse_abalone",
    "parse_adult",
    "read_idx",
]

DATA_ENV = "PRIVBAYES_DATA"
# ../shared/data next to the repository root (the checkout that holds this package)
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

_SOURCES = {
    "abalone": "the UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/1/abalone",
    "adult": "the UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/2/adult",
    "mnist": "Yann LeCun's MNIST page, http://yann.lecun.com/exdb/mnist/ (or a mirror with "
    "the same md5 sums)",
}


# -- locating files ---------------------------------------------------------------------


def data_dirs(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched for data files, in order (see the module docstring)."""
    dirs = []
    if data_dir is not None:
        dirs.append(Path(data_dir))
    env = os.environ.get(DATA_ENV)
    if env:
        dirs.append(Path(env))
    dirs.append(DEFAULT_DATA_DIR)
    return dirs


def find_data_file(dataset: str, filename: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of ``filename`` of ``dataset`` ("abalone", "adult" or "mnist").

    Raises FileNotFoundError listing every path tried and where to obtain the file.
    """
    tried = []
    for d in data_dirs(data_dir):
        for path in (d / dataset / filename, d / filename):
            if path.is_file():
                return path
            tried.append(str(path))
    source = _SOURCES.get(dataset, "its original source")
    raise FileNotFoundError(
        f"{dataset} data file {filename!r} not found. Looked in: {', '.join(tried)}. "
        f"Download it from {source} and put it in DIR/{dataset}/{filename}, then pass "
        f"--data-dir DIR or set {DATA_ENV}=DIR (see data/README.md)."
    )


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not an ASCII text file ({exc})") from None


def _float(text: str, path: Path, lineno: int, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {name} must be a number; got {text!r}") from None


# -- Abalone ----------------------------------------------------------------------------

ABALONE_MEASUREMENTS = (
    "length",
    "diameter",
    "height",
    "whole_weight",
    "shucked_weight",
    "viscera_weight",
    "shell_weight",
)


@dataclass(frozen=True)
class Abalone:
    """UCI Abalone, n = 4177 records in the original file.

    Attributes
    ----------
    sex : array of str, shape (n,), each "M", "F" or "I" (infant).
    measurements : float array, shape (n, 7), in :data:`ABALONE_MEASUREMENTS` order; UCI
        divided the millimetres and grams by 200.
    rings : int array, shape (n,), 1..29 (age in years = rings + 1.5).
    """

    sex: np.ndarray
    measurements: np.ndarray
    rings: np.ndarray

    def __len__(self) -> int:
        return len(self.rings)


def parse_abalone(path: str | os.PathLike) -> Abalone:
    """Parse ``abalone.data``: 9 comma-separated fields per line, no header.

    Blank lines are skipped. Raises ValueError naming the line for a wrong field count, an
    unknown sex code, a non-numeric measurement or a non-integer ring count.
    """
    path = Path(path)
    sex, meas, rings = [], [], []
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 9:
            raise ValueError(f"{path}:{lineno}: expected 9 fields, got {len(fields)}")
        if fields[0] not in ("M", "F", "I"):
            raise ValueError(f"{path}:{lineno}: sex must be M, F or I; got {fields[0]!r}")
        sex.append(fields[0])
        meas.append(
            [
                _float(f, path, lineno, n)
                for f, n in zip(fields[1:8], ABALONE_MEASUREMENTS, strict=True)
            ]
        )
        ring = _float(fields[8], path, lineno, "rings")
        if ring != int(ring) or ring < 0:
            raise ValueError(f"{path}:{lineno}: rings must be an integer >= 0; got {fields[8]!r}")
        rings.append(int(ring))
    if not rings:
        raise ValueError(f"{path}: no records")
    return Abalone(
        np.array(sex), np.array(meas, dtype=float).reshape(-1, 7), np.array(rings, dtype=np.int64)
    )


def load_abalone(data_dir: str | os.PathLike | None = None) -> Abalone:
    """Load ``abalone/abalone.data`` (see :func:`parse_abalone`, :func:`find_data_file`)."""
    return parse_abalone(find_data_file("abalone", "abalone.data", data_dir))


# -- Adult ------------------------------------------------------------------------------

_ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")

# The codebook of adult.names (public), in its order.
_ADULT_LEVELS = {
    "workclass": (
        "Private Self-emp-not-inc Self-emp-inc Federal-gov Local-gov State-gov Without-pay "
        "Never-worked"
    ).split(),
    "education": (
        "Bachelors Some-college 11th HS-grad Prof-school Assoc-acdm Assoc-voc 9th 7th-8th 12th "
        "Masters 1st-4th 10th Doctorate 5th-6th Preschool"
    ).split(),
    "marital-status": (
        "Married-civ-spouse Divorced Never-married Separated Widowed Married-spouse-absent "
        "Married-AF-spouse"
    ).split(),
    "occupation": (
        "Tech-support Craft-repair Other-service Sales Exec-managerial Prof-specialty "
        "Handlers-cleaners Machine-op-inspct Adm-clerical Farming-fishing Transport-moving "
        "Priv-house-serv Protective-serv Armed-Forces"
    ).split(),
    "relationship": "Wife Own-child Husband Not-in-family Other-relative Unmarried".split(),
    "race": "White Asian-Pac-Islander Amer-Indian-Eskimo Other Black".split(),
    "sex": ["Female", "Male"],
    "native-country": (
        "United-States Cambodia England Puerto-Rico Canada Germany Outlying-US(Guam-USVI-etc) "
        "India Japan Greece South China Cuba Iran Honduras Philippines Italy Poland Jamaica "
        "Vietnam Mexico Portugal Ireland France Dominican-Republic Laos Ecuador Taiwan Haiti "
        "Columbia Hungary Guatemala Nicaragua Scotland Thailand Yugoslavia El-Salvador "
        "Trinadad&Tobago Peru Hong Holand-Netherlands"
    ).split(),
}
ADULT_CATEGORICAL: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _ADULT_LEVELS.items()}


@dataclass(frozen=True)
class Adult:
    """UCI Adult (census income). 32,561 training and 16,281 test records in the originals.

    Attributes
    ----------
    numeric : float array, shape (n, 6), columns :data:`ADULT_NUMERIC`.
    categorical : dict mapping each :data:`ADULT_CATEGORICAL` column to an array of str,
        shape (n,); a missing value (``?`` in the file) is the empty string "".
    income : bool array, shape (n,), True for ``>50K`` (the label).
    """

    numeric: np.ndarray
    categorical: dict[str, np.ndarray]
    income: np.ndarray

    def __len__(self) -> int:
        return len(self.income)

    @property
    def missing(self) -> np.ndarray:
        """Bool array, shape (n,): True where any categorical value is missing."""
        out = np.zeros(len(self), dtype=bool)
        for col in self.categorical.values():
            out |= col == ""
        return out

    def column(self, name: str) -> np.ndarray:
        """One numeric column by its name in :data:`ADULT_NUMERIC`, shape (n,)."""
        if name not in ADULT_NUMERIC:
            raise KeyError(f"{name!r} is not a numeric Adult column; choose from {ADULT_NUMERIC}")
        return self.numeric[:, ADULT_NUMERIC.index(name)]

    def subset(self, mask: np.ndarray) -> Adult:
        """The records selected by a bool mask or index array."""
        return Adult(
            self.numeric[mask],
            {k: v[mask] for k, v in self.categorical.items()},
            self.income[mask],
        )


def parse_adult(path: str | os.PathLike) -> Adult:
    """Parse ``adult.data`` or ``adult.test``.

    Handles the test file's first line (``|1x3 Cross validator``: lines starting with ``|``
    are skipped), blank lines, whitespace after commas, ``?`` for missing values (kept as ""
    in ``categorical``) and the trailing ``.`` of the test labels. Raises ValueError naming
    the line for a wrong field count, a non-numeric number, a missing numeric value, an
    unknown category or label.
    """
    path = Path(path)
    numeric, cats, income = [], {k: [] for k in ADULT_CATEGORICAL}, []
    num_idx = [_ADULT_COLUMNS.index(c) for c in ADULT_NUMERIC]
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip() or line.lstrip().startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 15:
            raise ValueError(f"{path}:{lineno}: expected 15 fields, got {len(fields)}")
        for i in num_idx:
            if fields[i] == "?":
                raise ValueError(f"{path}:{lineno}: numeric {_ADULT_COLUMNS[i]} is missing")
        numeric.append([_float(fields[i], path, lineno, _ADULT_COLUMNS[i]) for i in num_idx])
        for name, levels in ADULT_CATEGORICAL.items():
            v = fields[_ADULT_COLUMNS.index(name)]
            if v == "?":
                v = ""
            elif v not in levels:
                raise ValueError(f"{path}:{lineno}: unknown {name} {v!r}")
            cats[name].append(v)
        label = fields[14].rstrip(".")
        if label not in (">50K", "<=50K"):
            raise ValueError(f"{path}:{lineno}: income must be >50K or <=50K; got {fields[14]!r}")
        income.append(label == ">50K")
    if not income:
        raise ValueError(f"{path}: no records")
    return Adult(
        np.array(numeric, dtype=float),
        {k: np.array(v, dtype=str) for k, v in cats.items()},
        np.array(income, dtype=bool),
    )


def load_adult(
    data_dir: str | os.PathLike | None = None, split: str = "train", *, drop_missing: bool = True
) -> Adult:
    """Load Adult: ``split`` "train" (adult.data), "test" (adult.test) or "all" (both, train
    first). ``drop_missing`` drops records with a ``?`` (32,561 -> 30,162 train, 16,281 ->
    15,060 test). Raises FileNotFoundError (where it looked) or ValueError (see
    :func:`parse_adult`).
    """
    files = {"train": ["adult.data"], "test": ["adult.test"], "all": ["adult.data", "adult.test"]}
    if split not in files:
        raise ValueError(f"split must be 'train', 'test' or 'all'; got {split!r}")
    parts = [parse_adult(find_data_file("adult", f, data_dir)) for f in files[split]]
    data = (
        parts[0]
        if len(parts) == 1
        else Adult(
            np.concatenate([p.numeric for p in parts]),
            {k: np.concatenate([p.categorical[k] for p in parts]) for k in ADULT_CATEGORICAL},
            np.concatenate([p.income for p in parts]),
        )
    )
    return data.subset(~data.missing) if drop_missing else data


def one_hot(values, levels) -> np.ndarray:
    """One-hot encode ``values`` (shape (n,)) against the public list ``levels`` (K,).

    Returns a float array of shape (n, K). A value outside ``levels`` (including the
    missing-value marker "") raises ValueError: drop or impute such records first.
    """
    values = np.asarray(values)
    levels = list(levels)
    index = {v: i for i, v in enumerate(levels)}
    codes = np.array([index.get(v, -1) for v in values.tolist()], dtype=np.int64)
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        raise ValueError(
            f"value {values[bad[0]]!r} at index {int(bad[0])} is not one of the "
            f"{len(levels)} levels"
        )
    out = np.zeros((len(values), len(levels)))
    out[np.arange(len(values)), codes] = 1.0
    return out


# -- MNIST ------------------------------------------------------------------------------

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx(path: str | os.PathLike, magic: int | None = None) -> np.ndarray:
    """Read an IDX file (gzip-compressed when the name ends in ``.gz``) into an array.

    The header is a 4-byte magic number (two zero bytes, a type code, the number of
    dimensions) and one big-endian uint32 per dimension. ``magic`` (e.g. 2051 for MNIST
    images, 2049 for labels) is checked when given. Raises ValueError for a corrupt gzip
    stream, a wrong magic number or a size that does not match the header.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{path}: corrupt or truncated gzip file ({exc})") from None
    if len(raw) < 4:
        raise ValueError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    found = int.from_bytes(raw[:4], "big")
    if magic is not None and found != magic:
        raise ValueError(f"{path}: magic number {found} (0x{found:08x}), expected {magic}")
    if raw[0] or raw[1] or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic 0x{found:08x})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{path}: size {len(raw)} bytes does not match the header's shape {shape} "
            f"({expected} bytes): truncated or corrupt"
        )
    return (
        np.frombuffer(raw, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def load_mnist(
    data_dir: str | os.PathLike | None = None, split: str = "train"
) -> tuple[np.ndarray, np.ndarray]:
    """Load MNIST ``split`` "train" or "test" from its two idx .gz files.

    Returns (images, labels): uint8 arrays of shape (n, 28, 28) (0 background, 255 ink) and
    (n,) with digits 0..9; n = 60,000 (train) or 10,000 (test) for the original files.
    Raises FileNotFoundError (where it looked) or ValueError for a corrupt file, a wrong
    magic number or image size, image and label counts that differ, or a label above 9.
    """
    if split not in _MNIST_FILES:
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    img_name, lab_name = _MNIST_FILES[split]
    img_path = find_data_file("mnist", img_name, data_dir)
    lab_path = find_data_file("mnist", lab_name, data_dir)
    images = read_idx(img_path, magic=2051)
    labels = read_idx(lab_path, magic=2049)
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(f"{img_path}: images have shape {images.shape}, expected (n, 28, 28)")
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(f"MNIST {split}: {len(images)} images but labels of shape {labels.shape}")
    if labels.size and labels.max() > 9:
        raise ValueError(f"{lab_path}: label {int(labels.max())} outside 0..9")
    return images, labels
