"""What the demo can say about some common subjects, in English and Chinese: key ideas, the steps of the process
(or the events of a timeline), examples, and the usual misconceptions with their corrections.

A topic none of these match gets the general phrasing of ``outline``; these only make common demo topics read
like a real course. Each entry is ``(English, Chinese)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Pair = tuple[str, str]


@dataclass(frozen=True)
class Subject:
    pattern: str
    ideas: tuple[Pair, ...]
    steps: tuple[Pair, ...]
    examples: tuple[Pair, ...]
    myths: tuple[Pair, ...]  # wrong ideas, stated as a learner would hold them
    facts: tuple[Pair, ...]  # the corrections, one per myth


SUBJECTS: tuple[Subject, ...] = (
    Subject(
        r"photosynth|光合",
        (("Light energy drives the reaction", "光能驱动整个反应"),
         ("Carbon dioxide and water are the raw materials", "二氧化碳和水是原料"),
         ("Glucose and oxygen are the products", "产物是葡萄糖和氧气")),
        (("Chlorophyll absorbs sunlight", "叶绿素吸收阳光"),
         ("Water is split and oxygen is released", "水被分解，释放出氧气"),
         ("Carbon dioxide is fixed into sugar", "二氧化碳被固定成糖"),
         ("The plant stores and uses the sugar", "植物储存并利用这些糖")),
        (("Leaves turning towards a window", "叶片朝向窗户生长"),
         ("Oxygen bubbles from pond weed in sunlight", "阳光下水草冒出氧气泡"),
         ("Crops growing faster in a greenhouse", "温室里的作物长得更快")),
        (("Plants get their food from the soil", "植物的食物来自土壤"),
         ("Plants only photosynthesise and never respire", "植物只进行光合作用，不进行呼吸作用")),
        (("Most of a plant's mass comes from carbon dioxide in the air", "植物的大部分质量来自空气中的二氧化碳"),
         ("Plants respire day and night, like animals", "植物和动物一样，昼夜都在呼吸")),
    ),
    Subject(
        r"ohm|circuit|voltage|欧姆|电路|电压|电流",
        (), (("Choose the quantity you want to find", "确定要求的物理量"),
             ("Write down the two known values with units", "写出两个已知量及单位"),
             ("Apply V = I × R in the right form", "选用 V = I × R 的合适形式"),
             ("Check the units of the answer", "检查结果的单位")),
        (("Choosing a resistor to protect an LED", "为 LED 选择限流电阻"),
         ("Why a phone charger is rated in volts and amps", "为什么手机充电器标注伏特和安培"),
         ("A dimmer switch changing a lamp's brightness", "调光开关改变灯的亮度")),
        (("Current is used up as it flows around a circuit", "电流在电路中流动时会被“用掉”"),
         ("A bigger voltage always means a bigger resistance", "电压越大，电阻一定越大")),
        (("The same current flows everywhere in a series circuit", "串联电路中各处电流相同"),
         ("Resistance is a property of the component, not of the voltage", "电阻是元件本身的性质，与电压无关")),
    ),
    Subject(
        r"binary search|bisection|二分",
        (("Each comparison halves the search range", "每次比较都把查找范围缩小一半"),
         ("The list has to be sorted first", "列表必须先排好序"),
         ("Doubling the list adds only one step", "列表长度翻倍只多一步")),
        (("Look at the middle element", "查看中间元素"),
         ("Compare it with the target", "与目标值比较"),
         ("Keep the half that can hold the target", "保留可能包含目标的那一半"),
         ("Repeat until found or the range is empty", "重复，直到找到或范围为空")),
        (("Finding a word in a dictionary", "在字典里查单词"),
         ("Guessing a number with higher-or-lower hints", "根据“大了还是小了”的提示猜数字"),
         ("Git bisect finding the commit that broke a build", "用 git bisect 找出引入错误的提交")),
        (("Binary search works on any list", "二分查找适用于任何列表"),
         ("It is always faster than a linear scan", "它总是比顺序查找快")),
        (("The list must be sorted, or halves are meaningless", "列表必须有序，否则“一半”毫无意义"),
         ("For a handful of items a simple scan is just as quick", "元素很少时，顺序查找一样快")),
    ),
    Subject(
        r"binary (?:number|numeral|digit|system|code)|base[- ]?2|二进制",
        (("Each place is worth twice the place to its right", "每一位的权重是右边一位的两倍"),
         ("Only the digits 0 and 1 are used", "只使用 0 和 1 两个数字"),
         ("n bits can count from 0 to 2^n − 1", "n 位可以表示 0 到 2^n − 1")),
        (("Write the place values 8, 4, 2, 1", "写出位权 8、4、2、1"),
         ("Put a 1 under each value you need", "在需要的位权下写 1"),
         ("Put a 0 under the others", "其余位写 0"),
         ("Add the values marked with 1 to check", "把标 1 的位权相加进行验证")),
        (("Light switches: on is 1, off is 0", "电灯开关：开是 1，关是 0"),
         ("How a computer stores the letter A as 01000001", "计算机把字母 A 存成 01000001"),
         ("Counting to 31 on the fingers of one hand", "用一只手的手指数到 31")),
        (("Binary 10 means ten", "二进制的 10 表示十"),
         ("More bits only make numbers longer, not larger", "位数多只是更长，并不能表示更大的数")),
        (("Binary 10 means two: one 2 and no 1", "二进制的 10 表示二：一个 2，零个 1"),
         ("Each extra bit doubles the largest number", "每多一位，能表示的最大数翻一番")),
    ),
    Subject(
        r"compound interest|interest rate|复利|利息|利率",
        (("Interest is earned on earlier interest", "利息也会产生利息"),
         ("Time matters more than the starting sum", "时间比本金更重要"),
         ("A higher rate makes the curve steeper", "利率越高，曲线越陡")),
        (("Start with the principal", "从本金开始"),
         ("Add one period's interest", "加上一期的利息"),
         ("Use the new total as the next principal", "把新的总额作为下一期的本金"),
         ("Repeat for every period", "每一期都重复这一步")),
        (("A savings account over ten years", "十年期的储蓄账户"),
         ("Credit card debt that keeps growing", "越滚越多的信用卡欠款"),
         ("The rule of 72 for doubling time", "估算翻倍时间的“72 法则”")),
        (("Interest is always paid only on the original sum", "利息永远只按最初的本金计算"),
         ("Starting a few years later makes little difference", "晚几年开始储蓄影响不大")),
        (("Compounding pays interest on interest too", "复利连利息也会计息"),
         ("Early years of growth have the longest time to compound", "越早投入，复利的时间越长")),
    ),
    Subject(
        r"newton|force|acceleration|牛顿|加速度",
        (), (("Draw every force on the object", "画出物体受到的所有力"),
             ("Add them up to find the net force", "求出合力"),
             ("Divide by the mass", "用合力除以质量"),
             ("Read off the acceleration and its direction", "得到加速度及其方向")),
        (("Pushing an empty versus a full shopping trolley", "推空购物车和满购物车的区别"),
         ("Seat belts in a sudden stop", "急刹车时的安全带"),
         ("A rocket accelerating as it burns fuel", "燃料燃烧时加速的火箭")),
        (("A moving object needs a force to keep moving", "运动的物体需要力才能保持运动"),
         ("Heavier objects always fall faster", "越重的物体下落越快")),
        (("Without friction an object keeps moving on its own", "没有摩擦，物体会自己一直运动下去"),
         ("Without air resistance all objects fall with the same acceleration",
          "没有空气阻力时，所有物体下落的加速度相同")),
    ),
    Subject(
        r"pythagor|right triangle|hypotenuse|勾股|直角三角形",
        (), (("Find the right angle", "找到直角"),
             ("Name the hypotenuse opposite it", "确定直角对面的斜边"),
             ("Square the two shorter sides and add them", "把两条直角边分别平方再相加"),
             ("Take the square root", "开平方")),
        (("Checking that a wall corner is square", "检查墙角是否成直角"),
         ("The diagonal of a TV screen", "电视屏幕的对角线"),
         ("The shortest path across a rectangular park", "穿过矩形公园的最短路线")),
        (("It works for every triangle", "它适用于所有三角形"),
         ("You can add the sides before squaring", "可以先把边相加再平方")),
        (("It holds only when one angle is 90°", "只有一个角是 90° 时才成立"),
         ("Square each side first, then add", "要先分别平方，再相加")),
    ),
    Subject(
        r"fraction|分数",
        (("The denominator says how many equal parts", "分母表示平均分成几份"),
         ("The numerator counts the parts taken", "分子表示取了其中几份"),
         ("Add fractions over a common denominator", "通分后才能相加")),
        (("Find a common denominator", "找到公分母"),
         ("Rewrite each fraction with it", "把每个分数化成同分母"),
         ("Add the numerators", "分子相加"),
         ("Simplify the result", "约分化简")),
        (("Sharing a pizza between friends", "和朋友分披萨"),
         ("Half a cup plus a quarter cup in a recipe", "食谱里的半杯加四分之一杯"),
         ("Reading a ruler in inches", "读英寸刻度的尺子")),
        (("Add tops and bottoms: 1/2 + 1/3 = 2/5", "分子分母分别相加：1/2 + 1/3 = 2/5"),
         ("A bigger denominator means a bigger fraction", "分母越大，分数越大")),
        (("Use a common denominator: 1/2 + 1/3 = 3/6 + 2/6 = 5/6", "先通分：1/2 + 1/3 = 3/6 + 2/6 = 5/6"),
         ("A bigger denominator means smaller parts", "分母越大，每一份越小")),
    ),
    Subject(
        r"water cycle|hydrologic|水循环",
        (("The sun's heat drives the cycle", "太阳的热量驱动水循环"),
         ("Water changes state but is never used up", "水会改变状态，但不会被用完"),
         ("Gravity brings water back down", "重力让水回到地面")),
        (("Evaporation from seas and lakes", "海洋和湖泊的水蒸发"),
         ("Condensation into clouds", "水汽凝结成云"),
         ("Precipitation as rain or snow", "以雨或雪的形式降水"),
         ("Collection in rivers and groundwater", "汇入河流和地下水")),
        (("Puddles drying after rain", "雨后水坑变干"),
         ("Dew on grass in the morning", "清晨草上的露水"),
         ("Snow melting into spring rivers", "春天融雪汇入河流")),
        (("Clouds are made of water vapour", "云是由水蒸气组成的"),
         ("Rain is new water made in the sky", "雨是天上新产生的水")),
        (("Clouds are tiny liquid droplets or ice crystals", "云是微小的水滴或冰晶"),
         ("Rain is the same water recycled again and again", "雨水是同一批水的反复循环")),
    ),
    Subject(
        r"french revolution|法国大革命",
        (("Debt and hunger fuelled anger at the old order", "债务和饥荒激起了对旧制度的不满"),
         ("Enlightenment ideas of rights and equality", "启蒙运动关于权利与平等的思想"),
         ("Power moved from the king to the nation", "权力从国王转移到国民手中")),
        (("1789: the Estates-General and the Bastille", "1789 年：三级会议与攻占巴士底狱"),
         ("1792: the monarchy ends and a republic begins", "1792 年：君主制结束，共和国建立"),
         ("1793–94: the Reign of Terror", "1793—1794 年：恐怖统治"),
         ("1799: Napoleon takes power", "1799 年：拿破仑掌权")),
        (("The Declaration of the Rights of Man", "《人权宣言》"),
         ("The metric system it introduced", "由此推行的公制单位"),
         ("Liberty, equality, fraternity as a national motto", "“自由、平等、博爱”成为国家格言")),
        (("It was over in a single day in 1789", "它在 1789 年的某一天就结束了"),
         ("Only the poor took part", "只有穷人参与了革命")),
        (("It unfolded over a decade of changing governments", "它历经十年，政府几经更替"),
         ("Lawyers, merchants and nobles also led it", "律师、商人和部分贵族也是领导者")),
    ),
    Subject(
        r"machine learning|\bml\b|机器学习",
        (("A model learns patterns from examples", "模型从样本中学习规律"),
         ("Training adjusts parameters to reduce error", "训练通过调整参数来减小误差"),
         ("Good models generalise to new data", "好的模型能泛化到新数据")),
        (("Collect and label the data", "收集并标注数据"),
         ("Split it into training and test sets", "划分训练集和测试集"),
         ("Train the model on the training set", "在训练集上训练模型"),
         ("Evaluate it on data it has not seen", "在未见过的数据上评估")),
        (("Spam filters in your inbox", "邮箱里的垃圾邮件过滤"),
         ("Recommendations on a video site", "视频网站的推荐"),
         ("Photo apps grouping faces", "相册应用按人脸分组")),
        (("More training accuracy always means a better model", "训练准确率越高，模型一定越好"),
         ("The model understands the data like a person", "模型像人一样理解数据")),
        (("Test data shows whether the model overfits", "要用测试数据检查是否过拟合"),
         ("A model finds statistical patterns, not meaning", "模型找到的是统计规律，而不是含义")),
    ),
    Subject(
        r"supply and demand|\\bsupply\\b|供求|供给|需求",
        (("Demand falls as the price rises", "价格上涨，需求下降"),
         ("Supply rises as the price rises", "价格上涨，供给增加"),
         ("The market settles where the two meet", "市场在两者相交处达到均衡")),
        (("Something shifts demand or supply", "某个因素改变了需求或供给"),
         ("A shortage or surplus appears at the old price", "原价格下出现短缺或过剩"),
         ("The price moves", "价格随之变动"),
         ("A new equilibrium is reached", "达到新的均衡")),
        (("Concert tickets selling out", "演唱会门票售罄"),
         ("Strawberries cheap in summer", "夏天草莓便宜"),
         ("Higher taxi fares in a rainstorm", "暴雨天打车更贵")),
        (("A higher price always means less is supplied", "价格越高，供给一定越少"),
         ("Prices are set by sellers alone", "价格完全由卖家决定")),
        (("Higher prices draw more sellers in", "更高的价格会吸引更多卖家"),
         ("Buyers and sellers together set the price", "价格由买卖双方共同决定")),
    ),
    Subject(
        r"cell division|mitosis|细胞分裂|有丝分裂",
        (("One cell becomes two identical cells", "一个细胞分裂成两个相同的细胞"),
         ("DNA is copied before the cell divides", "分裂前 DNA 先复制"),
         ("Growth and repair depend on it", "生长和修复都依赖细胞分裂")),
        (("Prophase: chromosomes condense", "前期：染色体凝缩"),
         ("Metaphase: chromosomes line up", "中期：染色体排列在赤道板"),
         ("Anaphase: copies are pulled apart", "后期：染色单体被拉向两极"),
         ("Telophase: two nuclei form", "末期：形成两个细胞核")),
        (("A cut on your skin healing", "皮肤伤口愈合"),
         ("A seedling growing taller", "幼苗长高"),
         ("Bacteria multiplying in milk", "细菌在牛奶中繁殖")),
        (("The new cells are half the size forever", "新细胞永远只有原来一半大"),
         ("Mitosis makes sperm and egg cells", "有丝分裂产生精子和卵细胞")),
        (("Daughter cells grow back to full size", "子细胞会长回正常大小"),
         ("Sex cells come from meiosis instead", "生殖细胞来自减数分裂")),
    ),
    Subject(
        r"\bsql\b|join|连接查询",
        (("A join matches rows on a shared key", "连接通过共同的键匹配行"),
         ("INNER JOIN keeps only matching rows", "INNER JOIN 只保留匹配的行"),
         ("LEFT JOIN keeps every row of the left table", "LEFT JOIN 保留左表的所有行")),
        (("Pick the two tables", "选出两张表"),
         ("Name the key columns that match", "指明用于匹配的键列"),
         ("Choose the join type", "选择连接类型"),
         ("Select the columns you need", "选出需要的列")),
        (("Orders with their customers' names", "订单及其客户姓名"),
         ("Students who have not handed in homework", "还没交作业的学生"),
         ("Products never ordered", "从未被订购的商品")),
        (("A join copies one table into another", "连接会把一张表复制到另一张表"),
         ("LEFT JOIN and INNER JOIN return the same rows", "LEFT JOIN 和 INNER JOIN 返回相同的行")),
        (("A join builds a result; the tables stay as they are", "连接只生成查询结果，原表不变"),
         ("LEFT JOIN adds unmatched rows with NULLs", "LEFT JOIN 会带上未匹配的行，并填充 NULL")),
    ),
)


def find_subject(*texts: str) -> Subject | None:
    """The subject a topic or requirement names, if any."""
    low = " ".join(texts).lower()
    for subject in SUBJECTS:
        if re.search(subject.pattern, low):
            return subject
    return None


def pick_lang(pairs: tuple[Pair, ...], zh: bool) -> list[str]:
    """One language of a list of pairs."""
    return [p[1] if zh else p[0] for p in pairs]
