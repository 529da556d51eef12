// The classroom's interface in English and Chinese (zh-CN). The language is the learner's choice when they made
// one on this device; else the course's (its stage `languageDirective`, else the script its texts are written
// in); else the browser's. `<html lang>` follows it, so assistive technology reads the interface right.

import { actionsOf, cjkShare } from "./util.js";

const STRINGS = {
  en: {
    loading: "Loading the classroom…",
    notFoundTitle: "Classroom not found",
    notFoundText: "There is no classroom at this address, or it is not yours.",
    goHome: "Go to your courses",
    signIn: "Sign in on the workbench, then open this page again.",
    loadFailed: "The classroom could not be loaded:",
    tryAgain: "Try again",
    scenes: "Scenes",
    sceneOf: "Scene {n} of {total}",
    play: "Play",
    pause: "Pause",
    replay: "Replay scene",
    prev: "Previous scene",
    next: "Next scene",
    speed: "Speed",
    autoplay: "Autoplay",
    timeline: "Actions of this scene",
    language: "Language",
    beingWritten: "being written",
    pendingScene: "This scene is being written. It appears here by itself when it is ready.",
    generating: "{ready} of {total} scenes are ready; the rest are being written.",
    live: "Live",
    imagePending: "Picture being generated…",
    imageFailed: "Picture could not be generated",
    imageDisabled: "Picture generation is off",
    videoPending: "Video being generated…",
    videoFailed: "Video could not be generated",
    videoDisabled: "Video generation is off",
    playAudio: "Play audio",
    speaking: "speaking",
    discussion: "Discussion",
    join: "Join",
    skip: "Skip",
    skipIn: "Skipping in {s} s",
    joined: "Talk it over with your classmates, then press play to go on.",
    whiteboard: "Whiteboard",
    quizCover: "{count} questions · {points} points",
    points: "{points} pt",
    submit: "Submit answers",
    answerAll: "Answer every question to submit.",
    yourAnswer: "Your answer",
    correct: "Correct",
    incorrect: "Incorrect",
    notGraded: "Not graded",
    correctAnswer: "Correct answer: {answer}",
    analysis: "Explanation",
    comment: "Comment",
    score: "Score: {score} of {total}",
    earned: "{score} of {total} points",
    retry: "Try again",
    completeTitle: "Course complete",
    completeText: "You have reached the end of {title}.",
    courseScore: "Your quiz score: {score} of {total} points",
    noQuizScore: "No quiz answered yet.",
    restart: "Start again",
    interactive: "Interactive page: {title}",
    shortcuts: "Keys: Space play/pause · ←/→ scenes · R replay · [ ] speed · Q ask a question",
    scoresByScene: "Score by quiz",
    scoreColumn: "Score",
    quizColumn: "Quiz",
    scoreOf: "{score} of {total}",
    notAnswered: "Not answered",
    askQuestion: "Ask a question",
    chatTitle: "Talk with the class",
    chatEmpty: "Ask anything about this scene; the teacher answers.",
    yourQuestion: "Your question",
    send: "Send",
    close: "Close the chat",
    you: "You",
    interrupted: "(cut off)",
    cutOff: "the answer was cut off",
    chatFailed: "No answer: {message}",
    joinDiscussion: "Let us discuss: {topic}",
    canvas: "Slide: {title}",
    exportPptx: "PowerPoint",
    exportHtml: "Offline page",
    download: "Download",
  },
  "zh-CN": {
    loading: "正在加载课堂…",
    notFoundTitle: "找不到课堂",
    notFoundText: "此地址没有课堂，或者它不属于你。",
    goHome: "返回你的课程",
    signIn: "请先在工作台登录，然后重新打开此页面。",
    loadFailed: "课堂无法加载：",
    tryAgain: "重试",
    scenes: "场景",
    sceneOf: "第 {n} 个场景，共 {total} 个",
    play: "播放",
    pause: "暂停",
    replay: "重播本场景",
    prev: "上一个场景",
    next: "下一个场景",
    speed: "速度",
    autoplay: "自动播放",
    timeline: "本场景的动作",
    language: "语言",
    beingWritten: "生成中",
    pendingScene: "此场景正在生成，完成后会自动出现在这里。",
    generating: "已就绪 {ready} / {total} 个场景，其余正在生成。",
    live: "实时",
    imagePending: "图片生成中…",
    imageFailed: "图片生成失败",
    imageDisabled: "图片生成已关闭",
    videoPending: "视频生成中…",
    videoFailed: "视频生成失败",
    videoDisabled: "视频生成已关闭",
    playAudio: "播放音频",
    speaking: "正在讲话",
    discussion: "讨论",
    join: "加入",
    skip: "跳过",
    skipIn: "{s} 秒后跳过",
    joined: "和同学们讨论一下，然后按播放继续。",
    whiteboard: "白板",
    quizCover: "{count} 道题 · 共 {points} 分",
    points: "{points} 分",
    submit: "提交答案",
    answerAll: "回答所有题目后才能提交。",
    yourAnswer: "你的答案",
    correct: "正确",
    incorrect: "错误",
    notGraded: "未评分",
    correctAnswer: "正确答案：{answer}",
    analysis: "解析",
    comment: "评语",
    score: "得分：{score} / {total}",
    earned: "{score} / {total} 分",
    retry: "再试一次",
    completeTitle: "课程完成",
    completeText: "你已学完《{title}》。",
    courseScore: "测验得分：{score} / {total} 分",
    noQuizScore: "还没有回答测验。",
    restart: "重新开始",
    interactive: "互动页面：{title}",
    shortcuts: "按键：空格 播放/暂停 · ←/→ 切换场景 · R 重播 · [ ] 速度 · Q 提问",
    scoresByScene: "各测验得分",
    scoreColumn: "得分",
    quizColumn: "测验",
    scoreOf: "{score} / {total}",
    notAnswered: "未作答",
    askQuestion: "提问",
    chatTitle: "与课堂交流",
    chatEmpty: "关于这个场景，有什么都可以问，老师会回答。",
    yourQuestion: "你的问题",
    send: "发送",
    close: "关闭对话",
    you: "你",
    interrupted: "（已中断）",
    cutOff: "回答被中断了",
    chatFailed: "没有回答：{message}",
    joinDiscussion: "我们来讨论：{topic}",
    canvas: "幻灯片：{title}",
    exportPptx: "PowerPoint",
    exportHtml: "离线网页",
    download: "下载",
  },
};

export const LANGUAGES = { en: "English", "zh-CN": "中文" };
const KEY = "openmaic.classroom.lang";
let current = "en";

/** The interface text `key` in the current language, with `{name}` filled from `vars`. */
export function t(key, vars = {}) {
  const text = STRINGS[current][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, k) => (vars[k] ?? `{${k}}`));
}

export const language = () => current;

/** The language a course is written in: "zh-CN" or "en" (null when nothing says). */
export function courseLanguage(classroom) {
  const directive = classroom?.stage?.languageDirective || "";
  if (/chinese|mandarin|中文|汉语|简体/i.test(directive)) return "zh-CN";
  if (directive && /english|英文|英语/i.test(directive)) return "en";
  const texts = [classroom?.stage?.name || ""];
  for (const scene of Array.isArray(classroom?.scenes) ? classroom.scenes : []) {
    texts.push(scene.title || "");
    for (const a of actionsOf(scene)) if (a.type === "speech") texts.push(String(a.text || ""));
  }
  const joined = texts.join(" ");
  if (!joined.trim()) return null;
  return cjkShare(joined) > 0.3 ? "zh-CN" : "en";
}

function stored() {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** Choose the interface language for `classroom` and set `<html lang>`. */
export function chooseLanguage(classroom) {
  const browser = (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh-CN" : "en";
  const pick = stored() || courseLanguage(classroom) || browser;
  setLanguage(STRINGS[pick] ? pick : "en", false);
  return current;
}

/** Switch the interface language (remembered on this device when `remember`). */
export function setLanguage(lang, remember = true) {
  current = STRINGS[lang] ? lang : "en";
  document.documentElement.lang = current;
  if (remember) {
    try {
      localStorage.setItem(KEY, current);
    } catch {
      // storage disabled: the choice lasts for this page
    }
  }
}
