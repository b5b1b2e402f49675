"""One person's memories in two languages, in one store (#31): every fact is asked about in the
other language, so each query competes with the whole store (not three distractors), with the
facts in its own language that share its words. Paraphrases that need an inference are marked.

Each fact is a distinct attribute of one person: a store can hold them all without contradiction,
and no question has a second right answer in the store ("what pets do I have?" with a dog, a cat
and goldfish stored would test nothing).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Asked:
    """A query and the fact (in the other language) that answers it."""

    query: str
    fact: str
    inference: bool = False


# Facts written in Chinese, asked about in English.
ZH_FACTS_EN_QUERIES: tuple[Asked, ...] = (
    Asked("Where do I live?", "我住在杭州西湖区"),
    Asked("When is my birthday?", "我的生日是三月十二号"),
    Asked("What am I allergic to?", "我对花生过敏"),
    Asked("Call me a cab", "我喜欢打车上班，不喜欢挤地铁", inference=True),
    Asked("What is my dog called?", "我的狗叫旺财"),
    Asked("Which company do I work for?", "我在阿里巴巴工作"),
    Asked("What is my wife's name?", "我妻子叫李娜"),
    Asked("Where did I grow up?", "我老家在成都"),
    Asked("What sport do I play on weekends?", "我每周末打羽毛球"),
    Asked("What languages can I speak?", "我会说英语和日语"),
    Asked("What should I cook tonight?", "我不吃辣", inference=True),
    Asked("How old am I?", "我今年三十二岁"),
    Asked("What is my favourite colour?", "我最喜欢的颜色是蓝色"),
    Asked("Do I have children?", "我有一个五岁的女儿"),
    Asked("What car do I drive?", "我开一辆白色的特斯拉"),
    Asked("What kind of music do I enjoy?", "我喜欢听古典音乐"),
    Asked("What did I study at university?", "我大学学的是计算机"),
    Asked("When do I usually go to bed?", "我一般晚上十一点睡觉"),
    Asked("Do I drink coffee or tea?", "我每天早上喝一杯绿茶"),
    Asked("What is my blood type?", "我的血型是A型"),
    Asked("Which book am I reading at the moment?", "我最近在读《三体》"),
    Asked("Book me a hotel for the trip", "我出差喜欢住安静的酒店", inference=True),
    Asked("What instrument do I play?", "我会弹钢琴"),
    Asked("Where are my parents living?", "我父母住在西安"),
    Asked("What medicine do I take?", "我每天吃降压药"),
    Asked("Where am I going on holiday?", "我下个月去云南旅游"),
    Asked("Suggest a gift for my wife", "我妻子喜欢收集香水", inference=True),
    Asked("What phone do I use?", "我用的是华为手机"),
    Asked("What is my manager's name?", "我的领导叫王强"),
    Asked("Which team do I support?", "我是广州恒大的球迷"),
    Asked("How tall am I?", "我身高一米七八"),
    Asked("Should I order a beer for me?", "我不喝酒", inference=True),
)

# Facts written in English, asked about in Chinese.
EN_FACTS_ZH_QUERIES: tuple[Asked, ...] = (
    Asked("我的猫叫什么名字？", "My cat is called Whiskers"),
    Asked("我春天对什么过敏？", "Sneezes around birch pollen every April"),
    Asked("我最好的朋友是谁？", "Best friend is Tom, a pilot"),
    Asked("我喜欢什么运动？", "Goes rock climbing every Thursday evening"),
    Asked("我的电脑用什么系统？", "Uses a MacBook with macOS for work"),
    Asked("我在学什么编程语言？", "Is learning Rust in the evenings"),
    Asked("我一般怎么去机场？", "Always takes the airport express train"),
    Asked("我喜欢什么电影？", "Favourite film is Spirited Away"),
    Asked("我的鞋码是多少？", "Wears size 42 shoes"),
    Asked("我客厅里养着什么？", "Keeps two goldfish in the living room"),
    Asked("我的结婚纪念日是哪天？", "Wedding anniversary is on October 3rd"),
    Asked("我在哪里健身？", "Works out at the gym near the office on Mondays"),
    Asked("帮我订个座位", "Prefers an aisle seat on planes", inference=True),
    Asked("我喜欢吃什么水果？", "Loves mangoes and lychees"),
    Asked("我平时听什么播客？", "Listens to a history podcast on the commute"),
    Asked("我周末一般做什么？", "Spends Sunday mornings gardening"),
    Asked("我有几个兄弟姐妹？", "Has one older brother who lives in Singapore"),
    Asked("我怕什么？", "Is afraid of heights"),
    Asked("我明年想去哪里？", "Plans to visit Iceland next summer"),
    Asked("推荐一家晚餐的餐厅", "Favourite food is Japanese ramen", inference=True),
    Asked("我的牙医是谁？", "Dentist is Dr. Patel on Elm Street"),
    Asked("周五晚上我一般给朋友做什么？", "Cooks Italian food for friends on Fridays"),
    Asked("我的咖啡怎么点？", "Orders a flat white with oat milk"),
    Asked("我在做什么项目？", "Is building a mobile app for a bakery"),
    Asked("我晚上几点下班？", "Usually finishes work at six thirty"),
    Asked("我喜欢什么季节？", "Likes autumn best"),
    Asked("今晚适合喝点什么？", "Is trying to quit caffeine after noon", inference=True),
    Asked("我支持哪个慈善机构？", "Volunteers at the animal shelter once a month"),
    Asked("我的邻居叫什么？", "Neighbour's name is Maria"),
    Asked("我讨厌哪种香草？", "Hates coriander"),
    Asked("我有什么健康问题？", "Has mild asthma"),
    Asked("给我妈妈买个礼物", "Mother loves silk scarves", inference=True),
    Asked("帮我安排明天的午饭", "Brings a packed lunch to the office every day", inference=True),
)

ALL_ASKED: tuple[Asked, ...] = ZH_FACTS_EN_QUERIES + EN_FACTS_ZH_QUERIES
