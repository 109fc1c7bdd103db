"""The operators' page in a real browser (examples/http/ops-test.sh runs it): Debian's Chromium,
headless, driven through Debian's chromedriver by python3-selenium; nothing is downloaded.

    /usr/bin/python3 examples/http/ops_browser.py URL USER PASSWORD ADMIN_DSN SCREENSHOT

It opens URL (/ops) with HTTP Basic credentials, waits for the first snapshot, then sells
(holds and commits assets, reserves and finalizes units, as ADMIN_DSN) while it watches the
page's counts move; it checks the background sweeper's state shows, that the browser logged
no error, and saves a screenshot to SCREENSHOT.  Prints "ok - ..." / "not ok - ...".
"""
import base64
import os
import sys
import threading
import time

import psycopg
from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "test", "harness"))
from tap import check  # noqa: E402

url, user, password, admin_dsn, screenshot = sys.argv[1:6]


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # Every request of the page (its EventSource too) carries the credentials.
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    return driver


# Each read is one script in the page, so that it sees one rendering: the page replaces its
# rows at each snapshot, and an element found before may be gone when it is read.
def text(driver, element_id):
    return driver.execute_script("return document.getElementById(arguments[0]).textContent", element_id)


def until(driver, what, predicate, seconds=20):
    try:
        WebDriverWait(driver, seconds, poll_frequency=0.2).until(lambda d: predicate(d))
        return True
    except TimeoutException:
        print(f"#   waited {seconds} s for {what}", flush=True)
        return False


def sell(stop: threading.Event, sold: list):
    """Sell until stopped: an asset held and committed, a unit reserved and finalized."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        n = 0
        while not stop.is_set() and n < 150:
            conn.execute("SELECT holdcommit.hc_commit((holdcommit.hc_hold(%s, 'ops-buyer', %s)).reservation_id)",
                         [f"A-{n}", f"ops-hold-{n}"])
            conn.execute("SELECT holdcommit.hc_finalize((holdcommit.hc_reserve('P-1', 1, 'ops-buyer', %s))"
                         ".reservation_id)", [f"ops-reserve-{n}"])
            n += 1
            sold[0] = n
            time.sleep(0.05)


def available(driver, product):
    value = driver.execute_script(
        "const r = [...document.querySelectorAll('#product-rows tr')].find((t) => t.dataset.product === arguments[0]);"
        "return r ? r.cells[3].textContent : null", product)
    return None if value is None else int(value)


def figure(driver, table, label):
    """The number beside label in table (a two-column table of the page); None if absent."""
    value = driver.execute_script(
        "const r = [...document.querySelectorAll('#' + arguments[0] + ' tr')]"
        "  .find((t) => t.cells.length === 2 && t.cells[0].textContent === arguments[1]);"
        "return r ? r.cells[1].textContent : null", table, label)
    return None if value is None else int(value)


def sweeper_state(driver, database):
    return driver.execute_script(
        "const r = [...document.querySelectorAll('#sweeper-rows tr')].find((t) => t.dataset.database === arguments[0]);"
        "return r ? r.cells[1].textContent : null", database)


driver = browser()
try:
    driver.get(url)
    check("ops: the page loads and shows its first snapshot",
          until(driver, "the first snapshot", lambda d: text(d, "status").startswith("updated")), True)
    check("ops: the page listens (LISTEN holdcommit)",
          until(driver, "the listener", lambda d: "as holdcommit notifies" in text(d, "status")), True)
    before_hour, before_p1 = int(text(driver, "sold-hour")), available(driver, "P-1")
    check("ops: stock and availability of each product", before_p1, 1000)
    check("ops: leases held and attempts awaiting review, as set up",
          (figure(driver, "review-rows", "leases held"), figure(driver, "review-rows", "attempts awaiting review")),
          (1, 1))

    stop, sold = threading.Event(), [0]
    seller = threading.Thread(target=sell, args=(stop, sold))
    seller.start()
    # The service polls every 60 s here: counts that move within 10 s moved on notifications.
    moved = until(driver, "the sold count to move",
                  lambda d: int(text(d, "sold-hour")) >= before_hour + 20 and (available(d, "P-1") or 1000) <= 990,
                  seconds=10)
    stop.set()
    seller.join()
    check("ops: a sale's counts move while it runs, as holdcommit notifies (sold per minute, availability)",
          moved, True)
    # Once the seller has stopped, the page settles on exactly what was sold.
    settled = until(driver, "the final counts",
                    lambda d: int(text(d, "sold-hour")) == before_hour + 2 * sold[0]
                    and available(d, "P-1") == 1000 - sold[0])
    check("ops: the page settles on what was sold (2 per round: an asset and a unit)", settled, True)
    check("ops: holds by state: the committed holds, the assets sold",
          (figure(driver, "states", "holds COMMITTED"), figure(driver, "states", "assets sold")),
          (sold[0], sold[0]))
    check("ops: the background sweeper's state in each database (hc_ops swept, postgres listed too)",
          (sweeper_state(driver, "hc_ops") in ("ok", "running"), sweeper_state(driver, "postgres") is not None),
          (True, True))
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    for e in errors[:5]:
        print(f"#   {e.get('message')}", flush=True)
    check("ops: the browser logged no error", len(errors), 0)
    os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
    check("ops: a screenshot is saved", driver.save_screenshot(screenshot), True)
except WebDriverException as e:
    print(f"not ok - ops: the browser ran ({e.msg})", flush=True)
finally:
    driver.quit()
