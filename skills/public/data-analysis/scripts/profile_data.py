#!/usr/bin/env python3
"""Profile a CSV/TSV/JSON/JSONL file, or aggregate it by group. Standard library only.

  profile_data.py FILE                      column types, missing values, stats, top values
  profile_data.py FILE --group-by COL --agg COL:mean [--agg COL:sum ...] [--top 20]
  profile_data.py FILE --json               the same, as JSON (for further scripting)

JSON input may be a list of objects, an object holding such a list, or an object of
equal-length column lists. Values such as "", NA, N/A, null, None, nan and - count as missing.
"""

import argparse
import csv
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

MISSING = {"", "na", "n/a", "null", "none", "nan", "-", "--"}
TRUE = {"true", "yes", "y", "t"}
FALSE = {"false", "no", "n", "f"}
AGGREGATES = ("count", "sum", "mean", "median", "min", "max")


def load(path: Path, max_rows: int | None) -> list[dict]:
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if suffix in (".jsonl", ".ndjson"):
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    elif suffix == ".json":
        rows = json_rows(json.loads(text))
    else:
        rows = csv_rows(text, suffix)
    rows = [r for r in rows if isinstance(r, dict)]
    return rows[:max_rows] if max_rows else rows


def json_rows(data) -> list:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if lists and all(isinstance(v, list) for v in data.values()):
            length = len(lists[0])
            if all(len(v) == length for v in lists) and not any(isinstance(x, dict) for x in lists[0]):
                return [{k: data[k][i] for k in data} for i in range(length)]
        for value in lists:
            if value and isinstance(value[0], dict):
                return value
        return [data]
    sys.exit("error: JSON must hold a list of objects")


def csv_rows(text: str, suffix: str) -> list[dict]:
    if suffix == ".tsv":
        delimiter = "\t"
    else:
        try:
            delimiter = csv.Sniffer().sniff(text[:20000], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    return list(csv.DictReader(text.splitlines(), delimiter=delimiter))


def is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in MISSING


def to_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    s = value.strip().lstrip("$€£¥")
    if "," in s and "." in s and s.rfind(",") < s.rfind("."):
        s = s.replace(",", "")
    elif s.count(",") >= 1 and all(len(p) == 3 for p in s.split(",")[1:]):
        s = s.replace(",", "")
    try:
        return int(s)
    except ValueError:
        pass
    try:
        number = float(s)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        s = value.strip().lower()
        if s in TRUE:
            return True
        if s in FALSE:
            return False
    return None


def to_date(value):
    if not isinstance(value, str) or len(value.strip()) < 8:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def infer(values: list) -> str:
    if not values:
        return "empty"
    if all(to_bool(v) is not None for v in values):
        return "bool"
    numbers = [to_number(v) for v in values]
    if all(n is not None for n in numbers):
        return "int" if all(isinstance(n, int) for n in numbers) else "float"
    if all(to_date(v) is not None for v in values):
        return "date"
    return "text"


def describe(rows: list[dict]) -> dict:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    report = {"rows": len(rows), "columns": []}
    for name in columns:
        raw = [row.get(name) for row in rows]
        present = [v for v in raw if not is_missing(v)]
        kind = infer(present)
        col = {
            "name": name,
            "type": kind,
            "missing": len(raw) - len(present),
            "unique": len({json.dumps(v, sort_keys=True, default=str) for v in present}),
        }
        if kind in ("int", "float"):
            nums = [to_number(v) for v in present]
            quartiles = statistics.quantiles(nums, n=4, method="inclusive") if len(nums) > 1 else [nums[0]] * 3
            col.update(
                min=min(nums),
                p25=quartiles[0],
                median=statistics.median(nums),
                p75=quartiles[2],
                max=max(nums),
                mean=statistics.fmean(nums),
                std=statistics.stdev(nums) if len(nums) > 1 else 0.0,
                sum=sum(nums),
            )
        elif kind == "date":
            dates = sorted(to_date(v) for v in present)
            col.update(min=dates[0].isoformat(), max=dates[-1].isoformat())
        if kind in ("text", "bool") or (kind == "int" and col["unique"] <= 10):
            top = Counter(str(v).strip() for v in present).most_common(5)
            col["top"] = [[value, count] for value, count in top]
        report["columns"].append(col)
    return report


def aggregate(rows: list[dict], group_by: str, specs: list[str], top: int) -> dict:
    parsed = []
    for spec in specs:
        column, _, fn = spec.partition(":")
        fn = fn or "sum"
        if fn not in AGGREGATES:
            sys.exit(f"error: unknown aggregate {fn!r}; use one of {', '.join(AGGREGATES)}")
        parsed.append((column, fn))
    for column in [group_by] + [c for c, _ in parsed]:
        if rows and not any(column in row for row in rows):
            sys.exit(f"error: no column {column!r}; columns: {', '.join(rows[0].keys())}")
    groups = defaultdict(list)
    for row in rows:
        key = row.get(group_by)
        groups["(missing)" if is_missing(key) else str(key).strip()].append(row)
    result = []
    for key, members in groups.items():
        entry = {group_by: key, "rows": len(members)}
        for column, fn in parsed:
            nums = [n for n in (to_number(r.get(column)) for r in members) if n is not None]
            label = f"{column}:{fn}"
            if fn == "count":
                entry[label] = sum(not is_missing(r.get(column)) for r in members)
            elif not nums:
                entry[label] = None
            else:
                entry[label] = {
                    "sum": sum,
                    "mean": statistics.fmean,
                    "median": statistics.median,
                    "min": min,
                    "max": max,
                }[fn](nums)
        result.append(entry)
    sort_key = f"{parsed[0][0]}:{parsed[0][1]}" if parsed else "rows"
    result.sort(key=lambda e: (e[sort_key] is None, -(e[sort_key] or 0)))
    return {"group_by": group_by, "groups": len(result), "top": result[:top]}


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e15 else f"{value:.4e}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def print_profile(report: dict) -> None:
    print(f"rows: {report['rows']:,}   columns: {len(report['columns'])}")
    for col in report["columns"]:
        pct = 100 * col["missing"] / report["rows"] if report["rows"] else 0
        print(f"\n{col['name']}  [{col['type']}]  missing {col['missing']} ({pct:.1f}%)  unique {col['unique']}")
        if "mean" in col:
            stats = ("min", "p25", "median", "p75", "max", "mean", "std")
            print("  " + "  ".join(f"{k}={fmt(col[k])}" for k in stats))
        elif col["type"] == "date":
            print(f"  from {col['min']} to {col['max']}")
        if "top" in col:
            print("  top: " + ", ".join(f"{v!r} x{c}" for v, c in col["top"]))


def print_groups(result: dict) -> None:
    print(f"{result['groups']} groups by {result['group_by']} (showing {len(result['top'])})")
    if not result["top"]:
        return
    headers = list(result["top"][0].keys())
    table = [headers] + [[fmt(e[h]) for h in headers] for e in result["top"]]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(headers))]
    for i, row in enumerate(table):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--group-by", metavar="COL")
    parser.add_argument("--agg", action="append", default=[], metavar="COL:FN", help=f"FN: {', '.join(AGGREGATES)}")
    parser.add_argument("--top", type=int, default=20, help="groups to show (default 20)")
    parser.add_argument("--max-rows", type=int, help="read at most this many rows")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()

    if not args.file.is_file():
        sys.exit(f"error: {args.file} is not a file")
    try:
        rows = load(args.file, args.max_rows)
    except (json.JSONDecodeError, csv.Error) as e:
        sys.exit(f"error: cannot parse {args.file}: {e}")
    if args.group_by:
        result = aggregate(rows, args.group_by, args.agg, args.top)
        printer = print_groups
    else:
        result = describe(rows)
        printer = print_profile
    if args.json:
        print(json.dumps(result, indent=2, default=str, ensure_ascii=False))
    else:
        printer(result)


if __name__ == "__main__":
    main()
