"""The evolution set (#31): a stored fact and a message a user says later, in English and Chinese,
where the message either changes the value of something the fact stated (it must supersede it, in
whatever words the change is told) or adds to it (it must be kept beside it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pair:
    """A stored fact, then a new one; ``changed`` when the new one replaces the stored value."""

    old: str
    new: str
    changed: bool


def _changed(old: str, new: str) -> Pair:
    return Pair(old, new, changed=True)


def _added(old: str, new: str) -> Pair:
    return Pair(old, new, changed=False)


CHANGED: tuple[Pair, ...] = (
    # jobs and employers
    _changed("Works at Google", "I quit Google and joined Stripe"),
    _changed("Works at Google", "I left Google last month, now I work at Stripe"),
    _changed("Works as a teacher", "Now I work as a nurse"),
    _changed("Is a software engineer", "I became a product manager"),
    _changed("Works as a barista", "I switched careers and now work as a data analyst"),
    _changed("Works at Acme", "I started a new job at Initech"),
    _changed("Is a nurse", "I got a job as a paramedic"),
    _changed("Works for Deloitte", "I'm now employed by KPMG"),
    _changed("Works at Acme", "I no longer work at Acme, I work at Globex now"),
    _changed("Works at Acme", "I'm working at Globex these days"),
    _changed("Works at Google", "I quit my job at Google"),
    # places
    _changed("Lives in Lisbon", "I no longer live in Lisbon"),
    _changed("Lives in Lisbon", "I moved to Porto"),
    _changed("Lives in Lisbon", "We relocated to Berlin last year"),
    _changed("Lives in Lisbon", "I'm now living in Madrid"),
    _changed("Lives in Lisbon", "I'm based in Paris now"),
    _changed("Lives in Lisbon", "I no longer live in Lisbon, I live in Faro now"),
    # relationships
    _changed("Is single", "I got married in June"),
    _changed("Is married", "I'm divorced now"),
    _changed("Is engaged", "We got married last weekend"),
    # contact details
    _changed("Phone number is 555-0101", "My new number is 555-0199"),
    _changed("Email is ana@old.com", "I switched my email to ana@new.com"),
    _changed("Phone number is 555-0101", "Changed my phone number to 555-0188"),
    # preferences
    _changed("Likes coffee", "I don't like coffee anymore"),
    _changed("Loves sushi", "I can't stand sushi now"),
    _changed("Favorite color is blue", "My favourite colour is green now"),
    _changed("Likes jazz", "I no longer like jazz"),
    # 工作与职业
    _changed("在谷歌工作", "我从谷歌辞职了，现在在字节跳动上班"),
    _changed("在谷歌工作", "我换工作了，现在在腾讯上班"),
    _changed("职业是老师", "我现在是一名护士"),
    _changed("在阿里巴巴上班", "我跳槽到了美团"),
    _changed("是一名程序员", "我转行当了厨师"),
    _changed("在阿里巴巴上班", "我已经不在阿里巴巴了，现在在京东工作"),
    _changed("在谷歌工作", "我从谷歌辞职了"),
    # 住处
    _changed("住在北京", "我不再住在北京了"),
    _changed("住在北京", "我搬到上海了"),
    _changed("住在北京", "我现在住在深圳"),
    _changed("住在北京", "我不再住北京了，定居在杭州"),
    _changed("住在成都", "我们全家搬去了重庆"),
    # 感情状况
    _changed("单身", "我结婚了"),
    _changed("已婚", "我离婚了"),
    # 联系方式
    _changed("手机号是13800000001", "我的手机号换成了13900000002"),
    _changed("邮箱是a@old.com", "我的邮箱改成b@new.com"),
    _changed("手机号是13800000001", "我换了新号码13900000003"),
    # 偏好
    _changed("喜欢喝咖啡", "我不再喜欢喝咖啡了"),
    _changed("最喜欢的颜色是蓝色", "我现在最喜欢的颜色是绿色"),
    _changed("喜欢吃辣", "我现在不吃辣了"),
    _changed("爱喝可乐", "我已经不爱喝可乐了"),
)

ADDED: tuple[Pair, ...] = (
    _added("Works at Google", "I also volunteer at a food bank"),
    _added("Lives in Lisbon", "I have a summer house in Faro"),
    _added("Likes coffee", "I like green tea"),
    _added("Has a dog named Rex", "I also have a cat named Tom"),
    _added("Speaks Portuguese", "I speak Spanish too"),
    _added("Phone number is 555-0101", "My work phone is 555-0199"),
    _added("Works as a teacher", "I play the cello in a quartet"),
    _added("Is married", "I have two kids"),
    _added("Loves sushi", "I love ramen"),
    _added("I moved to Porto", "I visited Madrid last week"),
    _added("Favorite color is blue", "My favorite food is pizza"),
    _added("Works at Google", "My wife works at Apple"),
    _added("Lives in Lisbon", "My parents live in Faro"),
    _added("在谷歌工作", "我周末在咖啡店兼职"),
    _added("住在北京", "我在上海出差一周"),
    _added("喜欢喝咖啡", "我也喜欢喝茶"),
    _added("养了一只狗", "我还养了一只猫"),
    _added("会说英语", "我也会说日语"),
    _added("手机号是13800000001", "我办公室电话是010-62345678"),
    _added("是一名医生", "我妻子是一名老师"),
    _added("在谷歌工作", "我哥哥在微软工作"),
    _added("单身", "我最近在学跳舞"),
)
