"""What the demo knows about a few subjects: a formula, a small numeric model, and the field a topic belongs to.

A topic that names one of the models (Ohm's law, binary search, …) gets a formula slide, a chart computed from
the model and a slider simulation driven by the same expression; any other topic gets the layouts that need no
numbers. The field (``science``, ``math``, ``computing``, ``history``, ``language``, ``other``) picks the
interactive widget and the timeline layout.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variable:
    name: str
    label: tuple[str, str]  # (en, zh)
    low: float
    high: float
    default: float
    step: float
    unit: str = ""


@dataclass(frozen=True)
class Model:
    """A formula with the variables a learner can move and the quantity it gives."""

    key: str
    pattern: str  # matched against the lower-cased topic and requirement
    latex: str
    variables: tuple[Variable, ...]
    result: tuple[str, str]  # label (en, zh)
    unit: str
    js: str  # a JavaScript expression over the variable names
    py: Callable[..., float]
    facts: tuple[tuple[str, str], ...] = field(default=())  # (en, zh) statements for key points
    plain: str = ""  # the formula as plain text, for text boxes and speech


def lower_label(label: str) -> str:
    """An English label inside a sentence: "Voltage" → "voltage", "CO₂ level" stays."""
    return label[:1].lower() + label[1:] if label[1:2].islower() else label


def worked_example(model: Model, lang: str) -> str:
    """One computation with the default values: "voltage 6 V, resistance 3 Ω → current 2 A"."""
    zh = lang == "zh"
    values = {v.name: v.default for v in model.variables}
    result = float(model.py(**values))
    shown = f"{result:.2f}".rstrip("0").rstrip(".") if abs(result) < 1000 else f"{round(result):d}"
    parts = [f"{(v.label[1] if zh else lower_label(v.label[0]))} {v.default:g}{(' ' + v.unit) if v.unit else ''}"
             for v in model.variables]  # fmt: skip
    name = model.result[1] if zh else lower_label(model.result[0])
    head = "例：" if zh else "Example: "
    return f"{head}{'，'.join(parts) if zh else ', '.join(parts)} → {name} {shown}{(' ' + model.unit) if model.unit else ''}"


MODELS: tuple[Model, ...] = (
    Model(
        "ohm",
        r"ohm|circuit|voltage|欧姆|电路|电压|电流",
        r"I = \frac{V}{R}",
        (Variable("voltage", ("Voltage", "电压"), 0, 12, 6, 1, "V"),
         Variable("resistance", ("Resistance", "电阻"), 1, 10, 3, 1, "Ω")),
        ("Current", "电流"), "A", "voltage / resistance", lambda voltage, resistance: voltage / resistance,
        (("Current grows in proportion to voltage", "电流与电压成正比"),
         ("Higher resistance means less current", "电阻越大，电流越小"),
         ("Voltage equals current times resistance", "电压等于电流乘以电阻")),
        plain='I = V / R',
    ),
    Model(
        "binary_search",
        r"binary search|bisection|二分",
        r"T(n) = \lceil \log_2 (n+1) \rceil",
        (Variable("size", ("List size", "列表长度"), 1, 1000, 100, 1),),
        ("Comparisons at most", "最多比较次数"), "", "Math.ceil(Math.log2(size + 1))",
        lambda size: math.ceil(math.log2(size + 1)),
        (("Each comparison halves the search range", "每次比较都把查找范围缩小一半"),
         ("The list has to be sorted first", "列表必须先排好序"),
         ("Doubling the list adds only one step", "列表长度翻倍只多一步")),
        plain='comparisons ≤ ⌈log₂(n + 1)⌉',
    ),
    Model(
        "binary_numbers",
        r"binary (?:number|numeral|digit|system|code)|base[- ]?2|二进制",
        r"1011_2 = 1\cdot 2^3 + 0\cdot 2^2 + 1\cdot 2^1 + 1\cdot 2^0 = 11",
        (Variable("bits", ("Number of bits", "位数"), 1, 16, 8, 1),),
        ("Largest value", "最大值"), "", "Math.pow(2, bits) - 1", lambda bits: 2**bits - 1,
        (("Each place is worth twice the place to its right", "每一位的权重是右边一位的两倍"),
         ("Only the digits 0 and 1 are used", "只使用 0 和 1 两个数字"),
         ("n bits can count from 0 to 2^n − 1", "n 位可以表示 0 到 2^n − 1")),
        plain='1011₂ = 8 + 0 + 2 + 1 = 11',
    ),
    Model(
        "interest",
        r"compound interest|interest rate|saving|复利|利息|利率",
        r"A = P\left(1 + \frac{r}{100}\right)^{t}",
        (Variable("principal", ("Principal", "本金"), 100, 10000, 1000, 100),
         Variable("rate", ("Rate (%)", "年利率（%）"), 0, 15, 5, 0.5),
         Variable("years", ("Years", "年数"), 0, 40, 10, 1)),
        ("Final amount", "最终金额"), "", "principal * Math.pow(1 + rate / 100, years)",
        lambda principal, rate, years: principal * (1 + rate / 100) ** years,
        (("Interest is earned on earlier interest", "利息也会产生利息"),
         ("Time matters more than the starting sum", "时间比本金更重要"),
         ("A higher rate makes the curve steeper", "利率越高，曲线越陡")),
        plain='A = P × (1 + r/100)^t',
    ),
    Model(
        "newton",
        r"newton|force|acceleration|牛顿|力学|加速度",
        r"F = m a",
        (Variable("mass", ("Mass", "质量"), 1, 50, 10, 1, "kg"),
         Variable("acceleration", ("Acceleration", "加速度"), 0, 20, 2, 1, "m/s²")),
        ("Force", "力"), "N", "mass * acceleration", lambda mass, acceleration: mass * acceleration,
        (("A net force changes an object's motion", "合力改变物体的运动状态"),
         ("More mass needs more force for the same push", "质量越大，需要的力越大"),
         ("Force and acceleration point the same way", "力与加速度方向相同")),
        plain='F = m × a',
    ),
    Model(
        "pythagoras",
        r"pythagor|right triangle|hypotenuse|勾股|直角三角形",
        r"c = \sqrt{a^2 + b^2}",
        (Variable("a", ("Side a", "直角边 a"), 1, 20, 3, 1),
         Variable("b", ("Side b", "直角边 b"), 1, 20, 4, 1)),
        ("Hypotenuse c", "斜边 c"), "", "Math.sqrt(a * a + b * b)", lambda a, b: math.sqrt(a * a + b * b),
        (("It holds only for right triangles", "只适用于直角三角形"),
         ("The hypotenuse is the longest side", "斜边是最长的边"),
         ("3, 4 and 5 form the classic example", "3、4、5 是最经典的例子")),
        plain='c = √(a² + b²)',
    ),
    Model(
        "photosynthesis",
        r"photosynth|光合",
        r"6CO_2 + 6H_2O \xrightarrow{\text{light}} C_6H_{12}O_6 + 6O_2",
        (Variable("light", ("Light intensity", "光照强度"), 0, 100, 50, 5, "%"),
         Variable("co2", ("CO₂ level", "二氧化碳浓度"), 0, 100, 40, 5, "%")),
        ("Sugar production rate", "糖的生成速率"), "",
        "Math.round(100 * (light / (light + 30)) * (co2 / (co2 + 20)))",
        lambda light, co2: round(100 * (light / (light + 30)) * (co2 / (co2 + 20))),
        (("Light energy drives the reaction", "光能驱动整个反应"),
         ("Carbon dioxide and water are the raw materials", "二氧化碳和水是原料"),
         ("Glucose and oxygen are the products", "产物是葡萄糖和氧气")),
        plain='6CO₂ + 6H₂O → C₆H₁₂O₆ + 6O₂',
    ),
    Model(
        "fractions",
        r"fraction|分数",
        r"\frac{a}{b} + \frac{c}{d} = \frac{ad + bc}{bd}",
        (Variable("numerator", ("Numerator", "分子"), 0, 12, 3, 1),
         Variable("denominator", ("Denominator", "分母"), 1, 12, 4, 1)),
        ("Decimal value", "小数值"), "", "numerator / denominator",
        lambda numerator, denominator: numerator / denominator,
        (("The denominator says how many equal parts", "分母表示平均分成几份"),
         ("The numerator counts the parts taken", "分子表示取了其中几份"),
         ("Add fractions over a common denominator", "通分后才能相加")),
        plain='a/b + c/d = (ad + bc) / bd',
    ),
)


def find_model(*texts: str) -> Model | None:
    """The model a topic or requirement names, if any."""
    low = " ".join(texts).lower()
    for model in MODELS:
        if re.search(model.pattern, low):
            return model
    return None


def sample(model: Model, points: int = 5) -> tuple[Variable, list[float], list[float]]:
    """The model's result over its first variable (others at their defaults): the variable, inputs, outputs."""
    var = model.variables[0]
    xs = [var.low + (var.high - var.low) * i / (points - 1) for i in range(points)]
    if var.step >= 1:
        xs = [float(round(x)) for x in xs]
    defaults = {v.name: v.default for v in model.variables}
    ys = [round(float(model.py(**{**defaults, var.name: x})), 2) for x in xs]
    return var, xs, ys


_FIELDS = [
    ("history", r"histor|revolution|war\b|dynasty|empire|ancient|century|civili[sz]ation|历史|革命|战争|朝|帝国|"
                r"古代|世纪|文明"),
    ("science", r"physic|chemi|biolog|cell|atom|molecul|energy|photosynth|ecosystem|planet|gravity|force|circuit|"
                r"ohm|evolution|climate|物理|化学|生物|细胞|原子|分子|能量|光合|生态|行星|引力|电路|进化|气候"),
    ("math", r"math|algebra|geometr|calculus|fraction|equation|probabilit|statistic|number|pythagor|triangle|"
             r"matrix|linear|interest|数学|代数|几何|微积分|分数|方程|概率|统计|数|勾股|矩阵|线性|利"),
    ("computing", r"program|python|java|code|coding|algorithm|search|sort|sql|data ?base|network|binary|comput|"
                  r"machine learning|software|web|编程|代码|算法|查找|排序|数据库|网络|二进制|计算机|机器学习|软件"),
    ("language", r"grammar|vocabular|english|spanish|french|japanese|pronunciation|writing|essay|语法|词汇|英语|"
                 r"发音|写作|作文|口语"),
]


def field_of(*texts: str) -> str:
    """The field a topic belongs to (``other`` when none matches)."""
    low = " ".join(texts).lower()
    for name, pattern in _FIELDS:
        if re.search(pattern, low):
            return name
    return "other"
