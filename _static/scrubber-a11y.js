// Interactive figures (matplotlib's to_jshtml player, made by attnlib.widgets.Explorer.scrubber):
// matplotlib's player changes only the image's pixels when its slider moves, so a screen
// reader hears nothing. Give each player a live line that says which frame is shown (from
// the slider's "i: label · ..." title), and keep the image's text alternative in step.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".pm-scrubber").forEach((box, n) => {
    const slider = box.querySelector("input.anim-slider");
    const img = box.querySelector(".animation img");
    if (!slider || !img) return;
    const labels = (slider.getAttribute("title") || "").split(" · ").map((t) => t.replace(/^\d+: /, ""));
    const name = slider.getAttribute("aria-label") || "Figure";
    const alt = img.getAttribute("alt") || "";
    const live = document.createElement("p");
    live.className = "pm-scrubber-now";
    live.setAttribute("aria-live", "polite");
    live.id = `pm-scrubber-now-${n}`;
    box.querySelector(".animation").after(live);
    slider.setAttribute("aria-describedby", live.id);
    const say = () => {
      const i = Number(slider.value);
      const label = labels[i] !== undefined ? labels[i] : String(i);
      live.textContent = `${name}: ${label} (frame ${i + 1} of ${Number(slider.max) + 1})`;
      slider.setAttribute("aria-valuetext", label);
      img.setAttribute("alt", `${alt} Now showing ${name} = ${label}.`);
    };
    // the player's buttons move the frame through its own code: follow the image
    new MutationObserver(say).observe(img, { attributes: true, attributeFilter: ["src"] });
    slider.addEventListener("input", say);
    say();
  });
});
