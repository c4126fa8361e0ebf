// The strings of the chapters' last pieces (issue 35), in English and Chinese: the gloss line
// of a sentence, the row's table with and without ÷ √d_k, the mask after the softmax, the
// chapter's own table beside the model's row, concat → W^O, the ending (本章小结 and the six
// 自测题 of 第 6 章), 实验二's ties, 实验三's threshold, the experiments' calls as code and the
// exported heatmap's numbers. i18n.js merges them into its STRINGS, and they follow its rules
// (the same keys and placeholders in both languages, the chapters' terms in Chinese). In English
// a chapter's title stays in Chinese only with its translation beside it: 自测题 (self-test).

export const CHAPTER_STRINGS = {
  en: {
    // The sentence box: the same sentence in the other language (twins.js).
    'gloss.show': 'show it in the other language too',
    'gloss.label.zh': 'In Chinese:',
    'gloss.label.en': 'In English:',
    'vocab.title.en': 'Vocabulary of {model}: its {k} English words (of {n})',

    // The scale, one notation everywhere: ÷ √d_k with its value (steps.js, rowsteps.js).
    'scale.sqrt': '÷ √d_k (√{dk} = {root})',
    'scale.sqrt.approx': '÷ √d_k (√{dk} ≈ {root})',
    'scale.given': '÷ {d} (the request\'s scale)',
    'step.2': 'Step 2: scale, {div}',
    'step.3.none': 'Step 3: mask: none in this run, so the scores go into softmax as they are.',

    // The row's table (rowsteps.js).
    'row.nomask': 'No key of this row is masked: softmax takes its scores as they are.',
    'row.ignored': 'Scores such as {low} lie {gap} below the row\'s largest ({top}): softmax gives them e^−{gap} of the largest one\'s weight, which is 0 to many decimals, as if they were masked.',
    'row.ignored.lesson': 'This head was built by hand to give such scores to the words it ignores on purpose.',
    'sqrt.switch': 'also without ÷ √d_k (softmax of q·k itself)',
    'row.col.raw': 'q·k, not scaled',
    'row.col.rawweight': 'softmax without ÷ √d_k',
    'sqrt.verdict': 'd_k = {dk}. With ÷ √d_k the largest weight is {w1} and the entropy {h1} bits; without it the largest weight is {w2} and the entropy {h2} bits (at most {hmax} bits over {n} keys).',
    'sqrt.sharper': 'Without the scaling the softmax is sharper, closer to one key taking everything: then its gradient is nearly 0, and training stalls. That is why the formula divides by √d_k.',
    'sqrt.same': 'Here the scaling changes little: this row\'s scores are far apart or tied already.',
    'sqrt.try': 'See it at d_k = 64, with q and k of variance 1',
    'row.col.after': 'softmax first, then zeroed',
    'row.after.verdict': 'Masked before the softmax, the row sums to {a}. Zeroed after it instead, the row sums to {b}: the {lost} that softmax gave the masked keys is lost, not shared out, and the row is no longer a set of weights.',

    // The chapter's own table of 它's row, beside the model's (twins.js CHAPTER_ROW).
    'chapter.title': 'The chapter\'s own numbers for this row, beside this model\'s',
    'chapter.col.word': 'word',
    'chapter.col.book': 'the chapter: score → weight',
    'chapter.col.model': 'this model: score → weight',
    'chapter.why': 'Why they differ: the chapter\'s numbers illustrate a head that spreads some weight, and its four weights sum to {sum}, its "…" standing for the other words of the row. The lesson model\'s coreference head was built by hand to carry one relation alone: it gives the words that cannot be the antecedent scores far below ({low} and lower), so they get nothing, and rests the rest on the start token ({start}). A gap of 3.7 between scores (4.8 and 1.1) gives 0.88 against 0.03; this head\'s gap of {gap} gives {w} against 0.000.',

    // Concat → W^O (concat.js).
    'concat.title': 'Concat → W^O: one word\'s head outputs side by side, into the layer\'s output',
    'concat.intro': 'Each head gives “{q}” a vector of d_k = {dk} numbers (its × V). Laid side by side (concat) they make one vector of {e} = {h} × {dk}; multiplied by W^O ({e} × {e}) it becomes the layer\'s output for “{q}”.',
    'concat.col.what': 'vector',
    'concat.col.values': 'its numbers (blue above 0, red below)',
    'concat.col.norm': 'length',
    'concat.concat': 'concat (side by side)',
    'concat.wo': '× W^O',
    'concat.output': 'output (from attnd)',
    'concat.identity': 'The lesson model\'s W^O is the identity (api/lesson/README.md): each head keeps its own {dk} dimensions, so the output is the concat itself. A trained model\'s W^O mixes the heads.',
    'concat.check': 'Checked against the API\'s output: the largest |concat × W^O − output| over the {e} numbers is {d}, within 0.00001.',
    'concat.bad': 'Checked against the API\'s output: the largest |concat × W^O − output| is {d}, more than 0.00001.',

    // The ending (recap.js): 第 6 章's 本章小结 and 自测题.
    'recap.title': '本章小结 (summary) and 自测题 (self-test)',
    'recap.summary': 'Attention reads the context by relevance. Each token\'s representation is projected into Q, K and V; the dot products of a query with every key, divided by √d_k, go through softmax to give weights that sum to 1, and the weights sum the values V. Multi-head attention lets several heads each follow one relation; their outputs, side by side and multiplied by W^O, make the new representation. Masks set what must not be seen to −∞ before the softmax: the padding mask leaves out padding, the causal mask keeps the future out of reach.',
    'quiz.title': '自测题 (self-test): six questions',
    'quiz.intro': 'Write your answer first: the chapter\'s answer opens once you have tried. Each question links to the step that shows it.',
    'quiz.go': 'Step {n}: {title} →',
    'quiz.yours': 'Your answer to question {n}',
    'quiz.placeholder': 'in your own words…',
    'quiz.show': 'Show the answer',
    'quiz.locked': 'Write your answer first',
    'quiz.q1': 'Explain in your own words what Q, K and V are.',
    'quiz.a1': 'Q, the query, is what the current position is looking for; K, the key, is how each position can be matched; V, the value, is what each position gives when attended to. All three are projections of the same token representation through three learned matrices W^Q, W^K and W^V: like a search\'s intent, index and document content, but continuous vectors learned in training (Experiment 2).',
    'quiz.q2': 'Why is the output of attention a weighted sum of the values, not of the keys?',
    'quiz.a2': 'The key only matches: its dot product with the query decides the weight. The value is what is read. What a position is found by and what it gives need not be the same, so the weights sum the values: in step 2, the output of "it" is almost all the value of "server log", which has 0.99 of the weight.',
    'quiz.q3': 'What does softmax do in attention?',
    'quiz.a3': 'It turns scores of any size into weights that are not negative and sum to 1: a higher score gets more weight, but no position is picked outright (soft weighting), and everything stays differentiable for training. A masked score of −∞ gets a weight of exactly 0.',
    'quiz.q4': 'What does multi-head attention give over a single head?',
    'quiz.a4': 'Each head has its own projections and can follow one relation in its own subspace (neighbours, subject, structure, coreference) without the others getting in its way; their outputs are laid side by side and mixed by W^O. The parameters are the same as one head of the full width.',
    'quiz.q5': 'Why does a generative language model need the causal mask?',
    'quiz.a5': 'It must predict each token from the ones before it. In training the whole text goes in at once; without the mask a position could read the answer from the future, the loss would fall, and the model would learn to copy, which cannot work when it generates. With the mask the rows before a changed word do not change by one bit (Experiment 3).',
    'quiz.q6': 'Why can the attention weights not be taken for the model\'s whole reasoning?',
    'quiz.a6': 'A weight says where one head of one layer read from. The output still goes through the other heads and W^O, residual connections, the feed-forward network, many layers and the output layer, and learned heads mix relations. Attention weights are a window to look through, not a full causal explanation.',
    'path.recap.title': '本章小结 (summary) and 自测题 (self-test)',
    'path.recap.text': 'The chapter in a few lines, and its six questions. Answer each in your own words, then open the chapter\'s answer; each question links back to the step that shows it.',
    'path.finish': 'Finish ✓',

    // 实验二's ties and 实验三's threshold.
    'exp2.verdict.tie': 'The query ties {docs} at {w} each; the other documents share {rest}.',
    'list.sep': ', ',
    'list.and': ' and ',
    'quote': '{w}',
    'exp3.off.leak': 'Causal mask off: {c} of the {n} rows before t changed: {rows}. Without the mask the earlier words see the later one: the leak the mask prevents.',
    'exp3.row.changed': '{w}, by {p}',
    'exp3.off.small': 'the other {k} by {p} or less',
    'exp3.rounding': '{z} other rows differ by less than 0.00001 of their length: float rounding, not counted as a change.',
    'exp3.threshold': 'A row counts as changed when its output moves by more than 0.00001 of its length (‖Δ output‖ / ‖output‖); float32 rounding moves a row by about 0.0000001.',

    // The experiments' own calls as code (callbox.js), and the exported heatmap's numbers.
    'callbox.title': 'The call as code',
    'callbox.note': 'The requests this experiment sent, ready to run: each prints the answer the page drew from.',
    'callbox.none': 'Run it first: it has sent nothing yet.',
    'export.numbers': 'numbers in the cells',

    // The seeded d_k = 64 example (compute.js).
    'preset.dk': '(e) d_k = 64: 8 tokens, q and k of variance 1, SDPA',
  },

  zh: {
    'gloss.show': '同时显示另一种语言的这句话',
    'gloss.label.zh': '中文：',
    'gloss.label.en': '英文：',
    'vocab.title.en': '{model} 模型的词表：{n} 个词中的 {k} 个英文词',

    'scale.sqrt': '÷ √d_k（√{dk} = {root}）',
    'scale.sqrt.approx': '÷ √d_k（√{dk} ≈ {root}）',
    'scale.given': '÷ {d}（请求里给定的缩放）',
    'step.2': '第 2 步：缩放，{div}',
    'step.3.none': '第 3 步：掩码：这次运行没有掩码，分数原样进入 softmax。',

    'row.nomask': '这一行没有被掩码的键：softmax 直接用这些分数。',
    'row.ignored': '像 {low} 这样的分数，比这一行最大的分数（{top}）低 {gap}：softmax 后它们的权重只有最大者的 e^−{gap}，小数点后很多位都是 0，和被掩码一样。',
    'row.ignored.lesson': '这个头是手工构造的：它故意给要忽略的词这样的分数。',
    'sqrt.switch': '同时看不除以 √d_k 的结果（直接对 q·k 做 softmax）',
    'row.col.raw': 'q·k（不缩放）',
    'row.col.rawweight': '不除以 √d_k 的 softmax',
    'sqrt.verdict': 'd_k = {dk}。除以 √d_k 时，最大的权重是 {w1}，熵是 {h1} 比特；不除时，最大的权重是 {w2}，熵是 {h2} 比特（{n} 个键最多 {hmax} 比特）。',
    'sqrt.sharper': '不缩放时 softmax 更尖锐，几乎所有权重都落在一个键上：这时梯度接近 0，训练就训不动了。所以公式要除以 √d_k。',
    'sqrt.same': '这一行缩放与否差别不大：它的分数本来就相差很远，或者并列。',
    'sqrt.try': '在 d_k = 64、q 和 k 各分量方差为 1 时看看',
    'row.col.after': '先 softmax，再置零',
    'row.after.verdict': '在 softmax 之前掩码，这一行的和是 {a}。改成在 softmax 之后再置零，和只剩 {b}：softmax 分给被掩码的键的 {lost} 丢掉了，没有分给别的键，这一行不再是一组权重。',

    'chapter.title': '教材里这一行的数字，和这个模型的对照',
    'chapter.col.word': '词',
    'chapter.col.book': '教材：分数 → 权重',
    'chapter.col.model': '这个模型：分数 → 权重',
    'chapter.why': '为什么不同：教材的数字是示意，表示一个把权重分散开一些的头；它的四个权重加起来是 {sum}，“…”代表这一行里的其他词。课程模型的指代头是手工构造的，只表示一种关系：不可能是先行词的词，分数都远远低于先行词（{low} 以及更低），一点权重也拿不到，剩下的权重停在起始符上（{start}）。分数相差 3.7（4.8 和 1.1）时，softmax 给出 0.88 对 0.03；这个头相差 {gap}，给出 {w} 对 0.000。',

    'concat.title': '拼接 → W^O：一个词在各头的输出并排拼接，再乘输出投影',
    'concat.intro': '每个头给「{q}」一个 d_k = {dk} 维的向量（它的 × V）。把它们并排拼接，得到一个 {e} = {h} × {dk} 维的向量；再乘 W^O（{e} × {e}），就是这一层给「{q}」的输出。',
    'concat.col.what': '向量',
    'concat.col.values': '它的各个数（蓝色大于 0，红色小于 0）',
    'concat.col.norm': '长度',
    'concat.concat': '拼接（并排）',
    'concat.wo': '× W^O',
    'concat.output': '输出（attnd 算出）',
    'concat.identity': '课程模型的 W^O 是单位矩阵（见 api/lesson/README.md）：每个头保留自己的 {dk} 维，所以输出就是拼接本身。训练出来的模型里，W^O 会把各头混合起来。',
    'concat.check': '和 API 的输出对照：{e} 个数里 |拼接 × W^O − 输出| 最大为 {d}，不超过 0.00001。',
    'concat.bad': '和 API 的输出对照：|拼接 × W^O − 输出| 最大为 {d}，超过了 0.00001。',

    'recap.title': '本章小结与自测题',
    'recap.summary': 'Attention 的核心是按相关性读取上下文。每个 token 的表示被投影成 Q、K、V；查询和每个键的点积除以 √d_k，经 softmax 得到总和为 1 的权重，再用权重对 V 加权求和。多头注意力让几个头各看一种关系，各头的输出并排拼接、乘 W^O，合成新的表示。掩码在 softmax 之前把不可看的位置设为 −∞：填充掩码排除补位，因果掩码不许偷看未来。',
    'quiz.title': '自测题：六道题',
    'quiz.intro': '先写下你的回答，写了之后才能展开参考答案。每道题都链接到能看到答案的那一步。',
    'quiz.go': '第 {n} 步：{title} →',
    'quiz.yours': '你对第 {n} 题的回答',
    'quiz.placeholder': '用自己的话写…',
    'quiz.show': '展开参考答案',
    'quiz.locked': '先写下你的回答',
    'quiz.q1': '用自己的话解释 Q、K、V 分别是什么。',
    'quiz.a1': 'Q（查询）是当前位置“想找什么”，K（键）是每个位置“能被怎样匹配到”，V（值）是每个位置“被关注时提供什么内容”。三者都是同一个 token 表示经过三组可学习的参数 W^Q、W^K、W^V 投影出来的：像搜索系统里的检索意图、索引和文档内容，但都是训练出来的连续向量（实验二）。',
    'quiz.q2': '为什么 Attention 的输出是 Value 的加权和，而不是 Key 的加权和？',
    'quiz.a2': '键只负责匹配：它和查询的点积决定权重；值才是被取走的内容。“靠什么被找到”和“被找到后提供什么”不必相同，所以用权重汇总的是值。第 2 步里，「它」的输出几乎全是「服务器日志」的值向量，因为它拿到了 0.99 的权重。',
    'quiz.q3': 'softmax 在 Attention 中起什么作用？',
    'quiz.a3': '它把任意大小的分数变成一组非负、总和为 1 的权重：分数越高权重越大，但不是硬选出一个位置（软加权），而且处处可微，能用梯度训练。被掩码成 −∞ 的分数，权重正好是 0。',
    'quiz.q4': '多头注意力相比单头注意力带来了什么能力？',
    'quiz.a4': '每个头有自己的投影，能在自己的子空间里学一种关系（相邻词、主语、结构、指代），互不打架；各头的输出并排拼接，再由 W^O 混合。参数量和同样宽度的单头相同。',
    'quiz.q5': '因果掩码为什么对生成式语言模型必要？',
    'quiz.a5': '生成时只能根据已经出现的 token 预测下一个。训练时整段文本一起送进去，如果不挡住未来位置，模型就能直接看到答案，损失会变低，学到的却是抄答案，生成时无法成立。有了掩码，被换掉的词之前的每一行一位都不变（实验三）。',
    'quiz.q6': '为什么不能把 Attention 权重直接等同于模型的完整推理过程？',
    'quiz.a6': '权重只说明某一层某一个头在汇总信息时更关注哪里。输出还要经过其他头和 W^O、残差连接、前馈网络、多层堆叠和输出层，而且学出来的头常常混着几种关系。注意力权重是一个观察窗口，不是完整的因果解释。',
    'path.recap.title': '本章小结与自测题',
    'path.recap.text': '用几句话回顾这一章，再做六道自测题。先用自己的话回答，再展开参考答案；每道题都链接回能看到答案的那一步。',
    'path.finish': '学完了 ✓',

    'exp2.verdict.tie': '这个查询给{docs}的权重并列最大，各为 {w}；其余文档一共分到 {rest}。',
    'list.sep': '、',
    'list.and': '和',
    'quote': '「{w}」',
    'exp3.off.leak': '因果掩码关：t 之前的 {n} 行中有 {c} 行变了：{rows}。没有掩码，前面的词就看得到后面的词：这正是掩码要堵住的泄漏。',
    'exp3.row.changed': '「{w}」，变化 {p}',
    'exp3.off.small': '其余 {k} 行变化不超过 {p}',
    'exp3.rounding': '另有 {z} 行的变化不到其长度的 0.00001：只是浮点舍入，不算变化。',
    'exp3.threshold': '一行的输出变化超过其长度的 0.00001（‖Δ 输出‖ / ‖输出‖）才算变了；32 位浮点的舍入误差大约只有 0.0000001。',

    'callbox.title': '这次调用的代码',
    'callbox.note': '这个实验发出的请求，可以直接运行：每个都会打印出页面画图所用的答案。',
    'callbox.none': '先运行一次：它还没有发出请求。',
    'export.numbers': '格子里写上数字',

    'preset.dk': '(e) d_k = 64：8 个 token，q、k 各分量方差为 1，缩放点积注意力',
  },
};
