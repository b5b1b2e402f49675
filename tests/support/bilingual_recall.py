"""Bilingual recall cases (issue #13): a query, the memory it asks about in the other language, and
memories in the query's language that do not answer it. Paraphrases, not translations, are marked."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Case:
    """One query, its target memory (other language) and distractors (query's language)."""

    query: str
    target: str
    distractors: tuple[str, ...]
    paraphrase: bool = False


EN_TO_ZH: tuple[Case, ...] = (
    Case(
        "Where do I live?",
        "我住在杭州西湖区",
        ("Likes hiking on weekends", "Works as a nurse", "Has two cats"),
    ),
    Case(
        "When is my birthday?",
        "我的生日是三月十二号",
        ("Birthday party for Tom is on Friday", "Likes chocolate cake", "Lives near the river"),
    ),
    Case(
        "What food am I allergic to?",
        "我对花生过敏",
        ("Allergic season starts in spring for my sister", "Likes Italian food", "Plays tennis"),
    ),
    Case(
        "Call me a cab",
        "我喜欢打车上班，不喜欢挤地铁",
        ("Calls mom every Sunday", "Has a meeting with the design team", "Reads before bed"),
        paraphrase=True,
    ),
    Case(
        "What is my dog's name?",
        "我的狗叫旺财",
        ("My neighbour's cat is named Luna", "Prefers tea over coffee", "Drives a blue car"),
    ),
    Case(
        "Which company do I work for?",
        "我在阿里巴巴工作",
        ("Company picnic was fun", "Enjoys painting landscapes", "Studies French at night"),
    ),
    Case(
        "What is my job?",
        "我是一名软件工程师",
        ("Job interview tips from a friend", "Enjoys jazz music", "Lives in an apartment"),
    ),
    Case(
        "Do I eat meat?",
        "我吃素，不吃肉",
        ("Likes spicy noodles", "Goes running every morning", "Has a sister in Boston"),
    ),
    Case(
        "What kind of music do I like?",
        "我喜欢听古典音乐",
        ("Kind of tired of the commute", "Works at a bank", "Has a dentist appointment next week"),
    ),
    Case(
        "Recommend a restaurant for dinner",
        "我最喜欢吃四川火锅",
        ("Dinner with Anna was nice yesterday", "Bought new running shoes", "Is learning to swim"),
        paraphrase=True,
    ),
    Case(
        "How do I get to work?",
        "我每天骑自行车上班",
        ("Work deadline is on Friday", "Likes watching movies", "Has a younger brother"),
    ),
    Case(
        "What is my wife's name?",
        "我妻子叫李娜",
        ("Friend's name is Mark", "Enjoys cooking pasta", "Goes to the gym on Mondays"),
    ),
    Case(
        "Where did I grow up?",
        "我老家在成都",
        ("Grew tomatoes in the garden", "Works from home", "Likes cats"),
    ),
    Case(
        "What sport do I play?",
        "我每周末打羽毛球",
        ("Watched a football match on TV", "Drinks green tea", "Has a meeting tomorrow"),
    ),
    Case(
        "Any plans for next week?",
        "我下周要去上海出差",
        ("Plans to repaint the kitchen someday", "Likes sushi", "Has a daughter"),
    ),
    Case(
        "What languages do I speak?",
        "我会说英语和日语",
        ("Reads science fiction", "Works as a designer", "Lives in a small town"),
    ),
    Case(
        "Book me a hotel",
        "我出差喜欢住安静的酒店",
        ("Booked a table for Friday", "Enjoys gardening", "Has a cat named Milo"),
        paraphrase=True,
    ),
    Case(
        "What should I cook tonight?",
        "我不吃辣",
        ("Tonight is movie night with friends", "Works at a hospital", "Likes jogging"),
        paraphrase=True,
    ),
    Case(
        "How old am I?",
        "我今年三十二岁",
        ("Old friends visited last week", "Likes red wine", "Plays the guitar"),
    ),
    Case(
        "What's my favourite colour?",
        "我最喜欢的颜色是蓝色",
        ("Favourite movie is Inception", "Works late on Tuesdays", "Has a sister"),
    ),
    Case(
        "Am I married?",
        "我已经结婚了",
        ("Attended a wedding last summer", "Prefers trains to planes", "Likes basketball"),
    ),
    Case(
        "Suggest a weekend activity",
        "我喜欢周末去爬山",
        ("Weekend shift at the store was busy", "Is allergic to dust", "Drinks coffee every morning"),
        paraphrase=True,
    ),
)

ZH_TO_EN: tuple[Case, ...] = (
    Case(
        "帮我叫个车",
        "Prefers taking a taxi to work",
        ("我住在杭州西湖区", "我的生日是三月十二号", "我喜欢喝绿茶"),
        paraphrase=True,
    ),
    Case(
        "我住在哪里？",
        "Lives in Boston near the harbour",
        ("我喜欢在家看书", "我在一家医院工作", "我有两个孩子"),
    ),
    Case(
        "我的生日是哪天？",
        "Birthday is on July 4th",
        ("我朋友的生日派对在周五", "我喜欢吃蛋糕", "我住在北京"),
    ),
    Case("我对什么过敏？", "Is allergic to shellfish", ("我喜欢吃海鲜面", "我每天跑步", "我有一只猫")),
    Case(
        "我的猫叫什么名字？",
        "My cat is called Whiskers",
        ("我邻居的狗叫小黑", "我喜欢喝咖啡", "我开一辆白色的车"),
    ),
    Case(
        "我在哪家公司上班？",
        "Works at Google as a product manager",
        ("公司年会很热闹", "我喜欢画画", "我晚上学法语"),
    ),
    Case(
        "我是做什么工作的？", "Works as a high school teacher", ("我工作很忙", "我喜欢爵士乐", "我住在公寓里")
    ),
    Case(
        "我吃肉吗？",
        "Is vegetarian and never eats meat",
        ("我喜欢吃辣的面条", "我每天早上跑步", "我姐姐在广州"),
    ),
    Case("我喜欢什么音乐？", "Loves listening to jazz", ("我喜欢看电影", "我在银行上班", "我下周要看牙医")),
    Case(
        "推荐一家晚餐的餐厅",
        "Favourite food is Japanese ramen",
        ("昨天和朋友吃了晚饭", "我买了新跑鞋", "我在学游泳"),
        paraphrase=True,
    ),
    Case(
        "我怎么去上班？",
        "Takes the subway to the office every day",
        ("我上班的截止日期是周五", "我喜欢看电影", "我有一个弟弟"),
    ),
    Case("我老公叫什么？", "Husband's name is David", ("我朋友叫小王", "我喜欢做意大利面", "我周一去健身房")),
    Case(
        "我是在哪里长大的？",
        "Grew up in a small town in Ohio",
        ("我在花园里种了西红柿", "我在家办公", "我喜欢猫"),
    ),
    Case(
        "我平时做什么运动？",
        "Plays tennis every Saturday",
        ("我在电视上看了足球赛", "我喜欢喝绿茶", "我明天有个会"),
    ),
    Case(
        "我下周有什么安排？",
        "Is flying to Tokyo for a conference next Tuesday",
        ("我打算有空重新粉刷厨房", "我喜欢寿司", "我有一个女儿"),
    ),
    Case(
        "我会说哪些语言？",
        "Speaks Spanish and German",
        ("我喜欢看科幻小说", "我是一名设计师", "我住在一个小镇"),
    ),
    Case(
        "帮我订个酒店",
        "Prefers quiet hotels with a gym when travelling",
        ("我订了周五的餐桌", "我喜欢园艺", "我的猫叫咪咪"),
        paraphrase=True,
    ),
    Case(
        "今晚做什么菜好？",
        "Cannot eat spicy food",
        ("今晚和朋友看电影", "我在医院工作", "我喜欢慢跑"),
        paraphrase=True,
    ),
    Case("我多大了？", "Is 45 years old", ("我的老朋友上周来看我", "我喜欢红酒", "我会弹吉他")),
    Case(
        "我最喜欢什么颜色？",
        "Favourite colour is green",
        ("我最喜欢的电影是盗梦空间", "我周二加班", "我有一个姐姐"),
    ),
    Case(
        "我结婚了吗？",
        "Got married last spring",
        ("我去年夏天参加了一场婚礼", "我喜欢坐火车", "我喜欢打篮球"),
    ),
    Case(
        "周末做点什么好？",
        "Enjoys cycling along the coast on weekends",
        ("周末商店很忙", "我对灰尘过敏", "我每天早上喝咖啡"),
        paraphrase=True,
    ),
)

CASES: tuple[Case, ...] = EN_TO_ZH + ZH_TO_EN
