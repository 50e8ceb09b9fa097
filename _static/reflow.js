// WCAG 1.4.10 (Reflow): MathJax 3 cannot break an inline formula, so one wider than its line
// (on a phone, a formula in a heading or a long product in prose) would push the page
// sideways. Mark each such formula; reflow.css lets it scroll inside its own box, and
// formulas that fit keep their place on the baseline. Re-checked when the width changes.
(() => {
  const mark = () => {
    document.querySelectorAll("mjx-container:not([display='true'])").forEach((m) => {
      m.classList.remove("pm-wide-math");
      const line = m.parentElement.getBoundingClientRect().width;
      if (m.getBoundingClientRect().width > line + 0.5) m.classList.add("pm-wide-math");
    });
    document.documentElement.dataset.pmReflow = "done";
  };
  const whenTypeset = (n) => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(mark);
    else if (n < 200) setTimeout(() => whenTypeset(n + 1), 50);
    else mark();
  };
  let pending = null;
  window.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(mark, 100); });
  document.addEventListener("DOMContentLoaded", () => whenTypeset(0));
})();
