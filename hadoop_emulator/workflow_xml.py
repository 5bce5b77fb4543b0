"""Parse and validate a workflow application (``uri:oozie:workflow:0.x``) with ``java``,
``map-reduce``, ``shell`` (``uri:oozie:shell-action:0.x``), ``spark``
(``uri:oozie:spark-action:0.x``) and ``sqoop`` (``uri:oozie:sqoop-action:0.x``) actions,
``kill`` and ``end`` nodes.

Validation follows the element order of Oozie's XML schemas (docs/hadoop-protocol.md, "The
workflow application") and reports violations the
way the real server does: 400 ``E0701`` "XML schema error, cvc-...". Control nodes other
than ``start``/``kill``/``end`` (``decision``, ``fork``, ``join``) and other action types
are rejected (the emulator does not run them). ``${...}`` expressions are kept as
written and resolved when an action starts (:func:`resolve_action`), as Oozie does.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field

WF_NS = re.compile(r"uri:oozie:workflow:(0\.[1-5](\.5)?|1\.0)")
SHELL_NS = re.compile(r"uri:oozie:shell-action:(0\.[1-3]|1\.0)")
SPARK_NS = re.compile(r"uri:oozie:spark-action:(0\.[12]|1\.0)")
SQOOP_NS = re.compile(r"uri:oozie:sqoop-action:(0\.[234]|1\.0)")
SLA_NS = re.compile(r"uri:oozie:sla:.*")
IDENTIFIER = re.compile(r"[a-zA-Z_][\-_a-zA-Z0-9]*")
SHELL_MAIN = "org.apache.oozie.action.hadoop.ShellMain"
# The launcher's main class of each action type: what Oozie names when the action fails.
LAUNCHER_MAIN = {
    "shell": SHELL_MAIN,
    "map-reduce": "org.apache.oozie.action.hadoop.StreamingMain",
    "spark": "org.apache.oozie.action.hadoop.SparkMain",
    "sqoop": "org.apache.oozie.action.hadoop.SqoopMain",
}
# Properties an action <configuration> must not set (Oozie fails the action: JA010).
DISALLOWED_PROPERTIES = ("user.name", "mapreduce.job.user.name", "fs.default.name", "yarn.resourcemanager.address")

Group = tuple[frozenset[str], int, int | None]

# Java and shell actions share their leading and trailing elements (XSD order).
_HEAD: list[Group] = [
    (frozenset({"job-tracker", "resource-manager"}), 0, 1),
    (frozenset({"name-node"}), 0, 1),
    (frozenset({"prepare"}), 0, 1),
    (frozenset({"launcher"}), 0, 1),
    (frozenset({"job-xml"}), 0, None),
    (frozenset({"configuration"}), 0, 1),
]
_TAIL: list[Group] = [
    (frozenset({"file"}), 0, None),
    (frozenset({"archive"}), 0, None),
    (frozenset({"capture-output"}), 0, 1),
]
_JAVA: list[Group] = [
    *_HEAD,
    (frozenset({"main-class"}), 1, 1),
    (frozenset({"java-opts", "java-opt"}), 0, None),
    (frozenset({"arg"}), 0, None),
    *_TAIL,
]
_SHELL: list[Group] = [
    *_HEAD,
    (frozenset({"exec"}), 1, 1),
    (frozenset({"argument"}), 0, None),
    (frozenset({"env-var"}), 0, None),
    *_TAIL,
]
# <map-reduce> is of the workflow namespace; <streaming> or <pipes> after <prepare>.
_MAP_REDUCE: list[Group] = [
    (frozenset({"job-tracker", "resource-manager"}), 0, 1),
    (frozenset({"name-node"}), 0, 1),
    (frozenset({"prepare"}), 0, 1),
    (frozenset({"launcher"}), 0, 1),
    (frozenset({"streaming", "pipes"}), 0, 1),
    (frozenset({"job-xml"}), 0, None),
    (frozenset({"configuration"}), 0, 1),
    (frozenset({"config-class"}), 0, 1),
    (frozenset({"file"}), 0, None),
    (frozenset({"archive"}), 0, None),
]
_STREAMING: list[Group] = [
    (frozenset({"mapper"}), 0, 1),
    (frozenset({"reducer"}), 0, 1),
    (frozenset({"record-reader"}), 0, 1),
    (frozenset({"record-reader-mapping"}), 0, None),
    (frozenset({"env"}), 0, None),
]
_SPARK: list[Group] = [
    *_HEAD,
    (frozenset({"master"}), 1, 1),
    (frozenset({"mode"}), 0, 1),
    (frozenset({"name"}), 1, 1),
    (frozenset({"class"}), 0, 1),
    (frozenset({"jar"}), 1, 1),
    (frozenset({"spark-opts"}), 0, 1),
    (frozenset({"arg"}), 0, None),
    (frozenset({"file"}), 0, None),
    (frozenset({"archive"}), 0, None),
]
# <sqoop>: the tool's arguments as one <command> line or as <arg> elements, never both.
_SQOOP: list[Group] = [
    *_HEAD,
    (frozenset({"command", "arg"}), 1, None),
    (frozenset({"file"}), 0, None),
    (frozenset({"archive"}), 0, None),
]
_APP: list[Group] = [
    (frozenset({"parameters"}), 0, 1),
    (frozenset({"global"}), 0, 1),
    (frozenset({"credentials"}), 0, 1),
    (frozenset({"start"}), 1, 1),
    (frozenset({"decision", "fork", "join", "kill", "action"}), 0, None),
    (frozenset({"end"}), 1, 1),
]
_GLOBAL: list[Group] = [
    (frozenset({"job-tracker", "resource-manager"}), 0, 1),
    (frozenset({"name-node"}), 0, 1),
    (frozenset({"launcher"}), 0, 1),
    (frozenset({"job-xml"}), 0, None),
    (frozenset({"configuration"}), 0, 1),
]


class WorkflowError(Exception):
    """A definition the server rejects: ``code`` and the formatted message (``"<code>: ..."``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = f"{code}: {message}"


def schema_error(detail: str) -> WorkflowError:
    return WorkflowError("E0701", f"XML schema error, {detail}")


@dataclass
class ActionDef:
    name: str
    type: str  # "java" | "shell" | "map-reduce" | "spark" | "sqoop"
    element: ET.Element  # the action's element, ${...} unresolved
    namespace: str
    ok_to: str
    error_to: str
    retry_max: int = 0
    retry_interval: int = 10
    cred: str | None = None

    def xml(self) -> str:
        return _serialize(self.element, self.namespace)


@dataclass
class KillDef:
    name: str
    message: str


@dataclass
class EndDef:
    name: str


Node = ActionDef | KillDef | EndDef


@dataclass
class GlobalDef:
    job_tracker: str | None = None
    name_node: str | None = None
    job_xml: list[str] = field(default_factory=list)
    configuration: dict[str, str] = field(default_factory=dict)


@dataclass
class WorkflowDef:
    name: str
    namespace: str
    start_to: str
    nodes: dict[str, Node]
    parameters: dict[str, str | None] = field(default_factory=dict)
    global_: GlobalDef = field(default_factory=GlobalDef)


@dataclass
class ActionSpec:
    """An action with every expression resolved: what the runner executes."""

    type: str
    job_tracker: str
    name_node: str
    configuration: dict[str, str]
    main_class: str
    java_opts: list[str]
    args: list[str]
    files: list[str]
    archives: list[str]
    capture_output: bool
    xml: str
    exec: str | None = None
    env_vars: list[str] = field(default_factory=list)
    prepare: list[tuple[str, str]] = field(default_factory=list)  # ("delete" | "mkdir", path)
    # map-reduce: the <streaming> commands as written (one line each) and <env> entries;
    # no mapper: a Java MapReduce job (its classes are properties).
    mapper: str | None = None
    reducer: str | None = None
    stream_env: list[str] = field(default_factory=list)
    # spark
    master: str | None = None
    mode: str | None = None
    app_name: str | None = None
    app_class: str | None = None
    jar: str | None = None
    spark_opts: str | None = None

    def command(self) -> str:
        """What fault regexes are matched against: main class (or exec, mapper, jar) and arguments."""
        head = {"shell": self.exec, "map-reduce": self.mapper, "spark": self.jar}.get(self.type, self.main_class)
        return " ".join([head or self.main_class, *self.args])


# -- parsing --------------------------------------------------------------------------
def _split(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, local = tag[1:].split("}", 1)
        return ns, local
    return "", tag


def _text(elem: ET.Element) -> str:
    """Text content with surrounding whitespace removed (JDOM ``getTextTrim``)."""
    return "".join(elem.itertext()).strip()


def _attr(elem: ET.Element, name: str) -> str:
    value = elem.get(name)
    if value is None:
        raise schema_error(f"cvc-complex-type.4: Attribute '{name}' must appear on element '{_split(elem.tag)[1]}'.")
    return value


def _identifier(value: str) -> str:
    if not IDENTIFIER.fullmatch(value):
        raise schema_error(
            f"cvc-pattern-valid: Value '{value}' is not facet-valid with respect to pattern "
            "'([a-zA-Z_]([\\-_a-zA-Z0-9])*){1,39}' for type 'IDENTIFIER'."
        )
    return value


def _check_sequence(parent: ET.Element, ns: str, groups: list[Group], skip_ns: re.Pattern[str] | None = None) -> None:
    """The children of ``parent`` follow ``groups`` (name set, min, max) in order."""
    pname = _split(parent.tag)[1]
    gi = 0
    count = 0

    def expected(from_gi: int) -> str:
        names = []
        for names_, lo, _ in groups[from_gi:]:
            names.extend(f'"{ns}":{n}' for n in sorted(names_))
            if lo > 0:
                break
        return ", ".join(names)

    for child in parent:
        if not isinstance(child.tag, str):
            continue  # comments, processing instructions
        cns, local = _split(child.tag)
        if skip_ns is not None and skip_ns.fullmatch(cns):
            continue
        start_gi = gi
        while True:
            if gi >= len(groups):
                raise schema_error(
                    f"cvc-complex-type.2.4.d: Invalid content was found starting with element '{local}'. "
                    "No child element is expected at this point."
                )
            names, lo, hi = groups[gi]
            if cns == ns and local in names and (hi is None or count < hi):
                count += 1
                break
            if count < lo:
                raise schema_error(
                    f"cvc-complex-type.2.4.a: Invalid content was found starting with element '{local}'. "
                    f"One of '{{{expected(start_gi)}}}' is expected."
                )
            gi += 1
            count = 0
    while gi < len(groups):
        names, lo, _ = groups[gi]
        if count < lo:
            raise schema_error(
                f"cvc-complex-type.2.4.b: The content of element '{pname}' is not complete. "
                f"One of '{{{expected(gi)}}}' is expected."
            )
        gi += 1
        count = 0


def parse_configuration_element(elem: ET.Element) -> dict[str, str]:
    props: dict[str, str] = {}
    for prop in elem:
        if not isinstance(prop.tag, str):
            continue
        fields = {_split(f.tag)[1]: f for f in prop if isinstance(f.tag, str)}
        if "name" not in fields or "value" not in fields:
            missing = "name" if "name" not in fields else "value"
            raise schema_error(
                f"cvc-complex-type.2.4.b: The content of element 'property' is not complete. "
                f"One of '{{{missing}}}' is expected."
            )
        props[_text(fields["name"])] = _text(fields["value"])
    return props


def parse_workflow(text: str | bytes) -> WorkflowDef:
    try:
        root = ET.fromstring(text.encode() if isinstance(text, str) else text)
    except ET.ParseError as exc:
        raise schema_error(str(exc)) from None
    ns, local = _split(root.tag)
    if local != "workflow-app" or not WF_NS.fullmatch(ns):
        raise schema_error(f"cvc-elt.1.a: Cannot find the declaration of element '{local}'.")
    name = _attr(root, "name")
    _check_sequence(root, ns, _APP, skip_ns=SLA_NS)
    wf = WorkflowDef(name=name, namespace=ns, start_to="", nodes={})
    for child in root:
        if not isinstance(child.tag, str) or _split(child.tag)[0] != ns:
            continue
        tag = _split(child.tag)[1]
        if tag == "parameters":
            wf.parameters = _parameters(child)
        elif tag == "global":
            wf.global_ = _global(child, ns)
        elif tag == "start":
            wf.start_to = _attr(child, "to")
        elif tag in ("decision", "fork", "join"):
            raise schema_error(f"control node <{tag}> [{child.get('name')}] is not supported by the emulator")
        elif tag in ("kill", "action", "end"):
            node = _node(child, ns, tag)
            if node.name in wf.nodes:
                raise WorkflowError("E0705", f"Nnode already defined, node [{node.name}]")
            wf.nodes[node.name] = node
    _check_transitions(wf)
    return wf


def _parameters(elem: ET.Element) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for prop in elem:
        if not isinstance(prop.tag, str):
            continue
        fields = {_split(f.tag)[1]: f for f in prop if isinstance(f.tag, str)}
        if "name" not in fields:
            raise schema_error(
                "cvc-complex-type.2.4.a: Invalid content was found in element 'property'. One of '{name}' is expected."
            )
        pname = _text(fields["name"])
        if not pname:
            raise WorkflowError("E0739", "Parameter name cannot be empty")
        out[pname] = _text(fields["value"]) if "value" in fields else None
    return out


def _global(elem: ET.Element, ns: str) -> GlobalDef:
    _check_sequence(elem, ns, _GLOBAL)
    g = GlobalDef()
    for child in elem:
        if not isinstance(child.tag, str):
            continue
        tag = _split(child.tag)[1]
        if tag in ("job-tracker", "resource-manager"):
            g.job_tracker = _text(child)
        elif tag == "name-node":
            g.name_node = _text(child)
        elif tag == "job-xml":
            g.job_xml.append(_text(child))
        elif tag == "configuration":
            g.configuration = parse_configuration_element(child)
    return g


def _node(elem: ET.Element, ns: str, tag: str) -> Node:
    name = _identifier(_attr(elem, "name"))
    if tag == "end":
        return EndDef(name)
    if tag == "kill":
        messages = [c for c in elem if isinstance(c.tag, str) and _split(c.tag) == (ns, "message")]
        if len(messages) != 1:
            raise schema_error(
                f"cvc-complex-type.2.4.b: The content of element 'kill' is not complete. "
                f"One of '{{\"{ns}\":message}}' is expected."
            )
        return KillDef(name, _text(messages[0]))
    children = [c for c in elem if isinstance(c.tag, str) and not SLA_NS.fullmatch(_split(c.tag)[0])]
    if len(children) != 3 or _split(children[1].tag) != (ns, "ok") or _split(children[2].tag) != (ns, "error"):
        raise schema_error(
            f"cvc-complex-type.2.4.a: Invalid content was found in action '{name}': expected exactly one action "
            f"element, then '{{\"{ns}\":ok}}', then '{{\"{ns}\":error}}'."
        )
    body, ok, error = children
    bns, btag = _split(body.tag)
    if bns == ns and btag == "java":
        _check_sequence(body, ns, _JAVA)
        tags = [_split(c.tag)[1] for c in body if isinstance(c.tag, str)]
        opts = [t for t in tags if t in ("java-opts", "java-opt")]
        if "java-opts" in opts and len(opts) > 1:
            bad = "java-opt" if "java-opt" in opts else "java-opts"
            raise schema_error(
                f"cvc-complex-type.2.4.a: Invalid content was found starting with element '{bad}'. "
                f'One of \'{{"{ns}":arg, "{ns}":file, "{ns}":archive, "{ns}":capture-output}}\' is expected.'
            )
        kind = "java"
    elif btag == "shell" and SHELL_NS.fullmatch(bns):
        _check_sequence(body, bns, _SHELL)
        kind = "shell"
    elif bns == ns and btag == "map-reduce":
        _check_sequence(body, ns, _MAP_REDUCE)
        for child in body:
            if isinstance(child.tag, str) and _split(child.tag)[1] == "streaming":
                _check_sequence(child, ns, _STREAMING)
        kind = "map-reduce"
    elif btag == "spark" and SPARK_NS.fullmatch(bns):
        _check_sequence(body, bns, _SPARK)
        kind = "spark"
    elif btag == "sqoop" and SQOOP_NS.fullmatch(bns):
        _check_sequence(body, bns, _SQOOP)
        tags = {_split(c.tag)[1] for c in body if isinstance(c.tag, str)}
        if {"command", "arg"} <= tags:
            raise schema_error(
                f"cvc-complex-type.2.4.a: Invalid content was found in action '{name}': "
                f"'{{\"{bns}\":command}}' and '{{\"{bns}\":arg}}' cannot both be given."
            )
        kind = "sqoop"
    else:
        raise WorkflowError("E0723", f"Unsupported action type, node [{name}] type [{btag}]")
    try:
        retry_max = int(elem.get("retry-max", "0"))
        retry_interval = int(elem.get("retry-interval", "10"))
    except ValueError:
        raise schema_error(
            f"cvc-datatype-valid.1.2.1: retry-max/retry-interval of action '{name}' is not an integer"
        ) from None
    return ActionDef(
        name=name,
        type=kind,
        element=body,
        namespace=bns,
        ok_to=_attr(ok, "to"),
        error_to=_attr(error, "to"),
        retry_max=retry_max,
        retry_interval=retry_interval,
        cred=elem.get("cred"),
    )


def _check_transitions(wf: WorkflowDef) -> None:
    ends = [n for n in wf.nodes.values() if isinstance(n, EndDef)]
    if len(ends) != 1:
        raise schema_error("cvc-complex-type.2.4.b: The content of element 'workflow-app' must have exactly one end")
    if wf.start_to not in wf.nodes:
        raise WorkflowError("E0708", f"Invalid transition, node [:start:] transition [{wf.start_to}]")
    for node in wf.nodes.values():
        if isinstance(node, ActionDef):
            for to in (node.ok_to, node.error_to):
                if to == node.name:
                    raise WorkflowError("E0706", f"Node cannot transition to itself node [{node.name}]")
                if to not in wf.nodes:
                    raise WorkflowError("E0708", f"Invalid transition, node [{node.name}] transition [{to}]")
    # Loops over action nodes.
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 1:
            raise WorkflowError("E0707", f"Loop detected at parsing, node [{name}]")
        if state.get(name) == 2:
            return
        state[name] = 1
        node = wf.nodes[name]
        if isinstance(node, ActionDef):
            visit(node.ok_to)
            visit(node.error_to)
        state[name] = 2

    visit(wf.start_to)


def missing_parameters(wf: WorkflowDef, conf: dict[str, str]) -> list[str]:
    return [p for p, default in wf.parameters.items() if default is None and p not in conf]


def check_parameters(wf: WorkflowDef, conf: dict[str, str]) -> None:
    missing = missing_parameters(wf, conf)
    if missing:
        raise WorkflowError(
            "E0738",
            f"The following {len(missing)} parameters are required but were not defined and no default values "
            f"are available: {','.join(missing)}",
        )


# -- resolution -----------------------------------------------------------------------
def _serialize(elem: ET.Element, ns: str) -> str:
    tail, elem.tail = elem.tail, None
    try:
        return ET.tostring(elem, encoding="unicode", default_namespace=ns)
    except ValueError:
        return ET.tostring(elem, encoding="unicode")
    finally:
        elem.tail = tail


# Elements whose text sets one field of the action, and those whose text adds to a list.
_SETS = {
    "main-class": "main_class", "class": "app_class", "master": "master", "mode": "mode", "name": "app_name",
    "jar": "jar", "spark-opts": "spark_opts", "exec": "exec",
}  # fmt: skip
_ADDS = {
    "java-opt": "java_opts", "arg": "args", "argument": "args", "env-var": "env_vars", "file": "files",
    "archive": "archives",
}  # fmt: skip


def resolve_action(
    adef: ActionDef,
    wf: WorkflowDef,
    evaluate: Callable[[str], str],
    read_conf: Callable[[str], dict[str, str]] | None = None,
) -> ActionSpec:
    """Resolve every ``${...}`` (``evaluate`` raises on an undefined name) and extract the
    action. ``read_conf`` loads a ``<job-xml>`` file (relative to the app dir)."""
    elem = _evaluated(adef.element, evaluate)
    # The cluster and configuration start from <global>; the action's own elements win.
    g = wf.global_
    job_tracker = g.job_tracker and evaluate(g.job_tracker)
    name_node = g.name_node and evaluate(g.name_node)
    job_xml = [evaluate(p) for p in g.job_xml]
    inline: dict[str, str] = {k: evaluate(v) for k, v in g.configuration.items()}
    spec = ActionSpec(
        type=adef.type,
        job_tracker="",
        name_node="",
        configuration={},
        main_class=LAUNCHER_MAIN.get(adef.type, ""),
        java_opts=[],
        args=[],
        files=[],
        archives=[],
        capture_output=False,
        xml=_serialize(elem, adef.namespace),
    )
    for child in elem:
        if not isinstance(child.tag, str):
            continue
        tag = _split(child.tag)[1]
        value = _text(child)
        if tag in ("job-tracker", "resource-manager"):
            job_tracker = value
        elif tag == "name-node":
            name_node = value
        elif tag == "job-xml":
            job_xml.append(value)
        elif tag == "configuration":
            inline.update(parse_configuration_element(child))
        else:
            _read_element(spec, tag, child, value)
    conf: dict[str, str] = {}
    for path in job_xml:
        if read_conf is not None:
            conf.update(read_conf(path))
    conf.update(inline)
    spec.configuration = conf
    if adef.type == "map-reduce" and not spec.mapper:
        spec.main_class = "org.apache.oozie.action.hadoop.MapReduceMain"
    spec.job_tracker = job_tracker or ""
    spec.name_node = name_node or ""
    return spec


def _evaluated(element: ET.Element, evaluate: Callable[[str], str]) -> ET.Element:
    """A copy of an action's element with every ``${...}`` in its text and attributes resolved."""
    elem = copy.deepcopy(element)
    for e in elem.iter():
        if e.text and "${" in e.text:
            e.text = evaluate(e.text)
        for k, v in list(e.attrib.items()):
            if "${" in v:
                e.attrib[k] = evaluate(v)
    return elem


def _read_element(spec: ActionSpec, tag: str, child: ET.Element, value: str) -> None:
    """What one element of the action's body says about how it runs."""
    if tag in _SETS:
        setattr(spec, _SETS[tag], value)
    elif tag in _ADDS:
        getattr(spec, _ADDS[tag]).append(value)
    elif tag in ("java-opts", "command"):
        # Oozie splits both at spaces (a <sqoop> <command> line is Sqoop's arguments).
        getattr(spec, "args" if tag == "command" else "java_opts").extend(value.split())
    elif tag == "capture-output":
        spec.capture_output = True
    elif tag == "streaming":
        _read_streaming(spec, child)
    elif tag == "prepare":
        for step in child:
            if isinstance(step.tag, str) and _split(step.tag)[1] in ("delete", "mkdir"):
                spec.prepare.append((_split(step.tag)[1], step.get("path", "")))


def _read_streaming(spec: ActionSpec, streaming: ET.Element) -> None:
    for part in streaming:
        if not isinstance(part.tag, str):
            continue
        ptag, ptext = _split(part.tag)[1], _text(part)
        if ptag == "mapper":
            spec.mapper = ptext
        elif ptag == "reducer":
            spec.reducer = ptext
        elif ptag == "env":
            spec.stream_env.append(ptext)
