"""fragscope.show and fragscope.page: the page of `fragscope view FILE -o
page.html`, returned without IPython and displayed in an iframe with it (a
stand-in IPython.display records what is displayed).

Run: FRAGSCOPE_BIN=target/debug/fragscope python3 tests/python/test_show.py FIXTURE
(tests/it/packaging.rs does)."""

import html
import json
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

FIXTURE = sys.argv.pop(1) if len(sys.argv) > 1 else None
MARK = '<script id="fragscope-data" type="application/json">'


def embedded(page):
    start = page.index(MARK) + len(MARK)
    return json.loads(page[start : page.index("</script>", start)])


class ShowTest(unittest.TestCase):
    def setUp(self):
        sys.modules.pop("IPython", None)
        sys.modules.pop("IPython.display", None)

    def test_without_ipython_returns_the_page(self):
        import fragscope

        sys.modules["IPython"] = None  # import IPython fails
        text = fragscope.show(FIXTURE)
        data = embedded(text)
        self.assertEqual(data["file"], os.path.basename(FIXTURE))
        self.assertEqual(data["schema"], "fragscope.view/2")
        self.assertFalse(data["served"])
        self.assertTrue(data["devices"][0]["bands"]["tiers"])
        sys.modules.pop("IPython")

    def test_in_a_notebook_displays_an_iframe(self):
        import fragscope

        shown = []
        display = types.ModuleType("IPython.display")
        display.HTML = lambda s: ("HTML", s)
        display.display = shown.append
        ipython = types.ModuleType("IPython")
        ipython.display = display
        sys.modules["IPython"] = ipython
        sys.modules["IPython.display"] = display
        text = fragscope.show(FIXTURE, "--max-points", "16")
        self.assertEqual(len(shown), 1)
        kind, frame = shown[0]
        self.assertEqual(kind, "HTML")
        self.assertTrue(frame.startswith('<iframe srcdoc="'))
        srcdoc = frame[len('<iframe srcdoc="') : frame.index('" style=')]
        self.assertEqual(html.unescape(srcdoc), text)
        self.assertLessEqual(embedded(text)["devices"][0]["levels"][0]["points"], 16)

    def test_a_bad_file_raises_with_the_message(self):
        import fragscope

        sys.modules["IPython"] = None
        with self.assertRaises(RuntimeError) as e:
            fragscope.show(os.path.join(os.path.dirname(__file__), "test_show.py"))
        self.assertIn("test_show.py", str(e.exception))
        sys.modules.pop("IPython")


if __name__ == "__main__":
    unittest.main()
