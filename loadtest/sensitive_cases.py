"""The adversarial set of the sensitive-content detector (P5): secrets and PII in English and
Chinese, each with the value that must never be stored verbatim, and benign look-alikes."""

from __future__ import annotations

from dataclasses import dataclass

from engram.models.enums import SensitiveCategory as Cat


@dataclass(frozen=True, slots=True)
class Case:
    """One sentence; ``category`` None marks a benign one, ``value`` what must not survive."""

    text: str
    category: Cat | None = None
    value: str = ""


def _c(category: Cat, text: str, value: str) -> Case:
    assert value in text, text
    return Case(text, category, value)


SENSITIVE: tuple[Case, ...] = (
    # secrets: known prefixes, private keys, stated passwords, high-entropy tokens
    _c(
        Cat.SECRET,
        "My OpenAI key is sk-proj-T3BlbkFJx9Qw2Er4Ty6Ui8Op0As",
        "sk-proj-T3BlbkFJx9Qw2Er4Ty6Ui8Op0As",
    ),
    _c(Cat.SECRET, "use sk-ant-api03-Zx81KqLm20PqRtVb55Nc for claude", "sk-ant-api03-Zx81KqLm20PqRtVb55Nc"),
    _c(Cat.SECRET, "The stripe key sk_live_51HxQa2KLmZp9TrV4", "sk_live_51HxQa2KLmZp9TrV4"),
    _c(
        Cat.SECRET,
        "github token ghp_a8Kd92LmQp0Zx7Vb3Nc5Tr1Wy6Ue4Io2Pq",
        "ghp_a8Kd92LmQp0Zx7Vb3Nc5Tr1Wy6Ue4Io2Pq",
    ),
    _c(Cat.SECRET, "AWS access key AKIAIOSFODNN7EXAMPLE for prod", "AKIAIOSFODNN7EXAMPLE"),
    _c(Cat.SECRET, "slack bot xoxb-2048-9931-Kq8LmZp2TrVx", "xoxb-2048-9931-Kq8LmZp2TrVx"),
    _c(
        Cat.SECRET,
        "Google maps key AIzaSyD3Kq8LmZp2TrVx9Wb4Nc7Ue1Io5Pq0As6",
        "AIzaSyD3Kq8LmZp2TrVx9Wb4Nc7Ue1Io5Pq0As6",
    ),
    _c(Cat.SECRET, "gitlab glpat-xK29dLm0QpZr7VbN3c5T", "glpat-xK29dLm0QpZr7VbN3c5T"),
    _c(Cat.SECRET, "hugging face hf_KqLmZp2TrVx9Wb4Nc7Ue1Io5Pq0As6Dd", "hf_KqLmZp2TrVx9Wb4Nc7Ue1Io5Pq0As6Dd"),
    _c(
        Cat.SECRET,
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N",
    ),
    _c(Cat.SECRET, "header Bearer 9f8Kq2LmZp0TrVx7Wb4Nc1Ue", "9f8Kq2LmZp0TrVx7Wb4Nc1Ue"),
    _c(
        Cat.SECRET,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7v8Kq2\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7v8Kq2",
    ),
    _c(Cat.SECRET, "My password is Hunter2!x", "Hunter2!x"),
    _c(Cat.SECRET, "wifi password: c0ffee-Beans", "c0ffee-Beans"),
    _c(Cat.SECRET, "the db passwd=Tr0ub4dor", "Tr0ub4dor"),
    _c(Cat.SECRET, "my api key is 7d1e55b0c9a24f6e", "7d1e55b0c9a24f6e"),
    _c(Cat.SECRET, "我的密码是abc12345", "abc12345"),
    _c(Cat.SECRET, "银行卡支付密码是 880213", "880213"),
    _c(Cat.SECRET, "邮箱口令：Zx9!kk23", "Zx9!kk23"),
    _c(Cat.SECRET, "服务器密钥为 Qm93Lk2sPz8xVb", "Qm93Lk2sPz8xVb"),
    _c(Cat.SECRET, "把这个令牌记下来 x8Kq2LmZ9pRtV4nWb7Yc3Jd5", "x8Kq2LmZ9pRtV4nWb7Yc3Jd5"),
    _c(Cat.SECRET, "session secret 4fQ9zLm2Xp7RtV0nWb3Yc8Jd6Kq1", "4fQ9zLm2Xp7RtV0nWb3Yc8Jd6Kq1"),
    _c(
        Cat.SECRET,
        "webhook signing 3a7bd3e2360a3d29eea436fcfb7e44c735d117c4",
        "3a7bd3e2360a3d29eea436fcfb7e44c735d117c4",
    ),
    # payment cards (Luhn-valid test numbers)
    _c(Cat.CARD, "my card is 4111 1111 1111 1111", "4111 1111 1111 1111"),
    _c(Cat.CARD, "Visa 4012888888881881 expires 09/27", "4012888888881881"),
    _c(Cat.CARD, "use the mastercard 5500-0000-0000-0004", "5500-0000-0000-0004"),
    _c(Cat.CARD, "Amex 3782 822463 10005 for travel", "3782 822463 10005"),
    _c(Cat.CARD, "Discover card 6011111111111117", "6011111111111117"),
    _c(Cat.CARD, "JCB 3530111333300000 is my backup", "3530111333300000"),
    _c(Cat.CARD, "diners 30569309025904", "30569309025904"),
    _c(Cat.CARD, "我的信用卡号是4111111111111111", "4111111111111111"),
    _c(Cat.CARD, "银行卡 5105 1051 0510 5100 尾号5100", "5105 1051 0510 5100"),
    _c(Cat.CARD, "请用卡号6011000990139424付款", "6011000990139424"),
    # numbers the text calls a card: redacted whatever their checksum (these fail the Luhn check)
    _c(Cat.CARD, "my card number is 4111 1111 1111 1112", "4111 1111 1111 1112"),
    _c(Cat.CARD, "credit card: 5500-0000-0000-0005", "5500-0000-0000-0005"),
    _c(Cat.CARD, "4111111111111112 is my debit card", "4111111111111112"),
    _c(Cat.CARD, "我的信用卡号是6222020200112233445", "6222020200112233445"),
    _c(Cat.CARD, "银行卡号 6217 0000 1234 5678 901", "6217 0000 1234 5678 901"),
    _c(Cat.CARD, "6222 0212 3456 7890 123是我的卡号", "6222 0212 3456 7890 123"),
    # bank account and routing numbers stated as such
    _c(Cat.ACCOUNT, "my bank account number is 0012345678", "0012345678"),
    _c(Cat.ACCOUNT, "account no. 12-3456-7890 at the credit union", "12-3456-7890"),
    _c(Cat.ACCOUNT, "routing number 021000021", "021000021"),
    _c(Cat.ACCOUNT, "我的银行账号是6228480402564890017", "6228480402564890017"),
    _c(Cat.ACCOUNT, "工资账号：1234 5678 9012", "1234 5678 9012"),
    # IBANs (mod-97 valid)
    _c(Cat.IBAN, "salary goes to DE89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00"),
    _c(Cat.IBAN, "my IBAN is GB82WEST12345698765432", "GB82WEST12345698765432"),
    _c(Cat.IBAN, "NL91ABNA0417164300 is the rent account", "NL91ABNA0417164300"),
    _c(Cat.IBAN, "我的欧洲账户FR1420041010050500013M02606", "FR1420041010050500013M02606"),
    # government ids
    _c(Cat.GOV_ID, "my SSN is 123-45-6789", "123-45-6789"),
    _c(Cat.GOV_ID, "social security number 078-05-1120", "078-05-1120"),
    _c(Cat.GOV_ID, "passport number E12345678", "E12345678"),
    _c(Cat.GOV_ID, "我的身份证号是11010519491231002X", "11010519491231002X"),
    _c(Cat.GOV_ID, "身份证110101199003074514，别忘了", "110101199003074514"),
    _c(Cat.GOV_ID, "我的护照号码是G28233515", "G28233515"),
    _c(Cat.GOV_ID, "national id: X1234567A", "X1234567A"),
    _c(Cat.GOV_ID, "my employee id is E20231145", "E20231145"),
    _c(Cat.GOV_ID, "customer ID: 88231907", "88231907"),
    _c(Cat.GOV_ID, "driver's license number D1234567", "D1234567"),
    _c(Cat.GOV_ID, "我的学号是2019123456", "2019123456"),
    _c(Cat.SECRET, "the license key is XK92-PL4M-QQ81-ZT6W", "XK92-PL4M-QQ81-ZT6W"),
    # email addresses
    _c(Cat.EMAIL, "email me at bob.smith@example.com", "bob.smith@example.com"),
    _c(Cat.EMAIL, "work mail: li.na+work@corp.example.cn", "li.na+work@corp.example.cn"),
    _c(Cat.EMAIL, "我的邮箱是zhangsan123@qq.com", "zhangsan123@qq.com"),
    _c(Cat.EMAIL, "联系 wang_wei@163.com 获取报价", "wang_wei@163.com"),
    # phone numbers
    _c(Cat.PHONE, "我的手机号是13812345678", "13812345678"),
    _c(Cat.PHONE, "电话 +86 139 1234 5678 随时打", "139 1234 5678"),
    _c(Cat.PHONE, "办公室座机010-62345678", "010-62345678"),
    _c(Cat.PHONE, "call me at (415) 555-2671", "555-2671"),
    _c(Cat.PHONE, "my number is +1 415 555 2671", "415 555 2671"),
    _c(Cat.PHONE, "reach me on +44 20 7946 0958", "7946 0958"),
    _c(Cat.PHONE, "cell 212-555-0187", "212-555-0187"),
)

BENIGN: tuple[Case, ...] = tuple(
    Case(text)
    for text in (
        "I love the book 4111",
        "my order number is 12345",
        "I strongly prefer aisle seats, always, no exceptions",
        "I absolutely hate cilantro and never want it",
        "我非常喜欢吃辣，一定要记住",
        "我的订单号是12345",
        "I live in room 1203",
        "I was born in 1990",
        "we run Python 3.11 and Ray 2.60",
        "the meeting is on 2024-05-01 at 10:30",
        "I ran 21.1 km on Sunday",
        "my zip code is 94110",
        "the bike cost $1,299.99",
        "I read 1984 by Orwell twice",
        "my flight is CA1234 at 8am",
        "我住在1203房间",
        "I have three kids aged 4, 7 and 11",
        "I forgot my password again yesterday",
        "I use a password manager for everything",
        "the password policy requires 12 characters",
        "我的密码管理器很好用",
        "my favourite number is 42",
        "我每天走10000步",
        "I paid 4111 yuan for the bike",
        "the zoom meeting id is 845 2231 9087",
        "our team uses the use-multilingual-v3 embedder",
        "the commit a1b2c3d fixed the bug",
        "我的工号是A1234",
        "I weigh 75.5 kg and I am 180 cm tall",
        "my lucky numbers are 7 14 21 28",
        "the conference is at booth B-204",
        "我喜欢周杰伦的歌，特别是《七里香》",
        "my daughter's school starts at 08:15",
        "the recipe needs 250 g of flour and 3 eggs",
        "I bought the 2019 MacBook Pro",
        "I prefer window seats on flights longer than 3 hours",
        "我最喜欢的数字是8888",
        "the apartment has 3 bedrooms and 2 bathrooms",
        "my GitHub username is octocat",
        "I moved to Shanghai in March 2021",
        "I work on the internationalization-and-localization team",
        "the order total was 1234.56 USD",
        "我的车牌号尾号是7",
        "I am allergic to peanuts, please remember",
        "ticket JIRA-4521 is about login",
        "the API key is not valid, the agent said",
        "I keep my notes in /home/ana/documents/projects/garden2024",
        "the docs are at https://example.org/guides/getting-started/install-v2",
        "my password is too weak, I need a new one",
        "我的手机是华为Mate60，用了两年",
        "I paid 12345678 yuan for the car",
        "my account was created in 2019",
        "I have 2 credit cards and 1 debit card",
        "我的账号被锁了三天",
        "card 4 of 52 was the queen of hearts",
        "I got a new library card today",
        "the tracking number is 1Z999AA10123456784",
        "she said her student id card was lost",
        "我每个月的卡路里摄入大约是60000",
        "the account has 12 members and 3 admins",
    )
)
